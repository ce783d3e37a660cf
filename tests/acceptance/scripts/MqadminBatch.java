// Runs several mqadmin commands (RocketMQ 4.9.8's MQAdminStartup.main0) in one JVM, so a
// test pays the JVM's start-up once. Each stdin line is one command's arguments,
// separated by tabs; for each, stdout and stderr are captured and written out as one
// JSON object per line: {"args": [...], "out": "...", "err": "..."}.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

import org.apache.rocketmq.tools.command.MQAdminStartup;

public class MqadminBatch {
    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c)); else b.append(c);
            }
        }
        return b.append('"').toString();
    }

    public static void main(String[] argv) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] args = line.split("\t");
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            System.setOut(new PrintStream(out, true, "UTF-8"));
            System.setErr(new PrintStream(err, true, "UTF-8"));
            try {
                MQAdminStartup.main0(args, null);
            } catch (Throwable t) {
                t.printStackTrace();
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(realOut);
                System.setErr(realErr);
            }
            StringBuilder doc = new StringBuilder("{\"args\":[");
            for (int i = 0; i < args.length; i++) {
                if (i > 0) doc.append(',');
                doc.append(quote(args[i]));
            }
            doc.append("],\"out\":").append(quote(out.toString("UTF-8")));
            doc.append(",\"err\":").append(quote(err.toString("UTF-8"))).append('}');
            realOut.println(doc);
            realOut.flush();
        }
        System.exit(0);
    }
}
