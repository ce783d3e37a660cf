import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Steps of the replication and cluster tests, one Runner call each, given by --param:
 * {@code produce} (topic, count, threads, interval_ms, first_uid, retries) and {@code consume}
 * (topic, group, expect, timeout_s, commit: whether its offsets must be on the broker when
 * it ends, true by default). Messages carry a "uid" property, the producer's index.
 */
final class StepScenarios {
    private StepScenarios() {
    }

    /** {@code count} sync sends from {@code threads} threads: every status, every acknowledged uid. */
    static Map<String, Object> produce(Ctx c) throws Exception {
        String topic = c.params.get("topic");
        int count = Integer.parseInt(c.params.getOrDefault("count", "100"));
        int threads = Integer.parseInt(c.params.getOrDefault("threads", "4"));
        long intervalMs = Long.parseLong(c.params.getOrDefault("interval_ms", "0"));
        int base = Integer.parseInt(c.params.getOrDefault("first_uid", "0"));
        DefaultMQProducer p = c.producer(c.params.getOrDefault("group", c.name("stepP")));
        p.setRetryTimesWhenSendFailed(Integer.parseInt(c.params.getOrDefault("retries", "2")));
        Map<String, Integer> statuses = new ConcurrentHashMap<>();
        Map<String, Integer> brokers = new ConcurrentHashMap<>();
        List<List<Object>> acked = new CopyOnWriteArrayList<>();
        List<String> errors = new CopyOnWriteArrayList<>();
        AtomicInteger next = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        for (int t = 0; t < threads; t++) {
            pool.submit(() -> {
                int i;
                while ((i = next.getAndIncrement()) < count) {
                    if (intervalMs > 0) {
                        try {
                            Thread.sleep(intervalMs);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                    i += base;
                    Message m = new Message(topic, "TagS", ("step-" + i).getBytes(StandardCharsets.UTF_8));
                    m.putUserProperty("uid", Integer.toString(i));
                    try {
                        SendResult r = p.send(m);
                        statuses.merge(r.getSendStatus().name(), 1, Integer::sum);
                        brokers.merge(r.getMessageQueue().getBrokerName(), 1, Integer::sum);
                        acked.add(Arrays.asList(i, r.getSendStatus().name(), r.getMsgId(), r.getOffsetMsgId(),
                            r.getMessageQueue().getBrokerName(), r.getMessageQueue().getQueueId(), r.getQueueOffset()));
                    } catch (Exception e) {
                        statuses.merge("exception", 1, Integer::sum);
                        if (errors.size() < 10) errors.add(i + ": " + e);
                    }
                }
            });
        }
        pool.shutdown();
        pool.awaitTermination(10, TimeUnit.MINUTES);
        Map<String, Object> out = new TreeMap<>();
        out.put("statuses", new TreeMap<>(statuses));
        out.put("brokers", new TreeMap<>(brokers));
        out.put("acked", acked);
        out.put("errors", errors);
        return out;
    }

    /** A push consumer of {@code group} from the first offset until {@code expect} uids came (or the time is up). */
    static Map<String, Object> consume(Ctx c) throws Exception {
        String topic = c.params.get("topic");
        int expect = Integer.parseInt(c.params.get("expect"));
        long timeoutMs = (long) (Double.parseDouble(c.params.getOrDefault("timeout_s", "30")) * 1000);
        Set<Integer> uids = ConcurrentHashMap.newKeySet();
        Map<String, Integer> fromBrokers = new ConcurrentHashMap<>();
        AtomicInteger deliveries = new AtomicInteger();
        DefaultMQPushConsumer pc = c.push(c.params.get("group"));
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                deliveries.incrementAndGet();
                String uid = m.getUserProperty("uid");
                if (uid != null) uids.add(Integer.parseInt(uid));
                fromBrokers.merge(m.getStoreHost().toString(), 1, Integer::sum);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long t0 = System.currentTimeMillis();
        pc.start();
        Ctx.await(timeoutMs, () -> uids.size() >= expect);
        double took = (System.currentTimeMillis() - t0) / 1000.0;
        if (Boolean.parseBoolean(c.params.getOrDefault("commit", "true"))) {  // the test reads the offsets after
            Thread.sleep(300);
            pc.getDefaultMQPushConsumerImpl().persistConsumerOffset();
            Thread.sleep(700); // the offset commits are oneway
        }
        pc.shutdown();
        Map<String, Object> out = new TreeMap<>();
        out.put("uids", new ArrayList<>(new TreeSet<>(uids)));
        out.put("deliveries", deliveries.get());
        out.put("storeHosts", new TreeMap<>(fromBrokers));
        out.put("seconds", took);
        return out;
    }
}
