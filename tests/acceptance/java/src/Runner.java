import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.serializer.SerializerFeature;

import java.io.ByteArrayOutputStream;
import java.io.FileOutputStream;
import java.io.FileDescriptor;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * Runs acceptance scenarios against one name server + broker with the real Java 4.9.8
 * client and admin tools, several at once in this one JVM, and prints one line per
 * scenario as it ends:
 *
 * <pre>RESULT {"scenario": NAME, "ok": true|false, "seconds": S, "data": {...}, "error": "..."}</pre>
 *
 * Usage: {@code Runner --namesrv H:P --broker H:P --broker-name N --cluster C --prefix P
 * [--threads N] [--param K=V]... SCENARIO...} ({@code all} = every scenario but the
 * parametrized ones, which read their --param values). A scenario's facts are in
 * "data"; the pytest side asserts on them, the same assertions for every broker.
 *
 * mqadmin's sub-commands print to System.out: stdout is routed per thread (a command's
 * output lands in its own buffer), so the RESULT lines keep the real stdout to themselves.
 * The mqadmin scenarios run one after another on one thread (each command builds its
 * own DefaultMQAdminExt with the same admin group, which two at once would share), and
 * with them the two that must not overlap their cleaning ({@link #HALF_QUEUE}).
 */
public final class Runner {
    static final PrintStream REAL_OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    static final ThreadLocal<ByteArrayOutputStream> CAPTURE = new ThreadLocal<>();
    /**
     * Scenarios on the serial thread too, one at a time with mqadmin's cleanUnusedTopic:
     * the half topic has no config until the broker's first check pass (Java's and
     * trocket's), so a clean meanwhile drops its queue, and the half message that
     * admin_resume_half waits for with it.
     */
    static final java.util.Set<String> HALF_QUEUE = java.util.Set.of("admin_resume_half", "admin_clean_calls");

    /** System.out: the thread's capture buffer if it has one, else stderr. */
    static final class RoutingOut extends OutputStream {
        @Override public void write(int b) {
            ByteArrayOutputStream buf = CAPTURE.get();
            if (buf != null) buf.write(b); else System.err.write(b);
        }
        @Override public void write(byte[] b, int off, int len) {
            ByteArrayOutputStream buf = CAPTURE.get();
            if (buf != null) buf.write(b, off, len); else System.err.write(b, off, len);
        }
    }

    public static void main(String[] args) throws Exception {
        System.setOut(new PrintStream(new RoutingOut(), true, StandardCharsets.UTF_8));
        Map<String, String> opts = new LinkedHashMap<>();
        Map<String, String> params = new LinkedHashMap<>();
        List<String> names = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--param")) {
                String[] kv = args[++i].split("=", 2);
                params.put(kv[0], kv[1]);
            } else if (args[i].startsWith("--")) {
                opts.put(args[i].substring(2), args[++i]);
            } else {
                names.add(args[i]);
            }
        }
        Ctx ctx = new Ctx(opts.get("namesrv"), opts.get("broker"), opts.getOrDefault("broker-name", "broker-a"),
            opts.getOrDefault("cluster", "DefaultCluster"), opts.get("prefix"));
        ctx.params.putAll(params);
        Map<String, Scenario> all = Scenarios.all();
        if (names.isEmpty() || names.contains("all")) {
            names = new ArrayList<>(all.keySet());
            names.removeAll(Scenarios.parametrized().keySet());
        }
        all.putAll(Scenarios.parametrized());
        List<String> known = new ArrayList<>();
        for (String n : names) {
            if (all.containsKey(n)) known.add(n);
            else emit(n, false, 0, null, "no such scenario: " + n);
        }
        names = known;
        int threads = Integer.parseInt(opts.getOrDefault("threads", "8"));
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        ExecutorService serial = Executors.newSingleThreadExecutor();
        for (String n : names) {
            Scenario s = all.get(n);
            (n.startsWith("mqadmin_") || HALF_QUEUE.contains(n) ? serial : pool).submit(() -> runOne(ctx, n, s));
        }
        pool.shutdown();
        serial.shutdown();
        long limit = Long.parseLong(opts.getOrDefault("deadline", "300"));
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(limit);
        // the serial queue (every mqadmin scenario, one after another) may end well after
        // the pool: it gets what is left of the deadline, not a few seconds more
        boolean done = pool.awaitTermination(limit, TimeUnit.SECONDS)
            && serial.awaitTermination(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
        ctx.close();
        REAL_OUT.println("DONE " + (done ? "complete" : "deadline"));
        REAL_OUT.flush();
        // client threads (timers, netty) are not all daemons
        Runtime.getRuntime().halt(0);
    }

    static void runOne(Ctx ctx, String name, Scenario s) {
        long t0 = System.nanoTime();
        try {
            Map<String, Object> data = s.run(ctx);
            emit(name, true, (System.nanoTime() - t0) / 1e9, data, null);
        } catch (Throwable e) {
            emit(name, false, (System.nanoTime() - t0) / 1e9, null, describe(e));
        }
    }

    static String describe(Throwable e) {
        StringWriter sw = new StringWriter();
        e.printStackTrace(new PrintWriter(sw));
        String text = sw.toString();
        return text.length() > 4000 ? text.substring(0, 4000) : text;
    }

    static synchronized void emit(String name, boolean ok, double seconds, Map<String, Object> data, String error) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("scenario", name);
        line.put("ok", ok);
        line.put("seconds", Math.round(seconds * 1000) / 1000.0);
        if (data != null) line.put("data", data);
        if (error != null) line.put("error", error);
        REAL_OUT.println("RESULT " + JSON.toJSONString(line, SerializerFeature.DisableCircularReferenceDetect,
            SerializerFeature.WriteMapNullValue));
        REAL_OUT.flush();
    }
}
