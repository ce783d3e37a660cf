import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.topic.TopicValidator;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

/** Features other issues bring to trocket: transactions, request-reply (23), SQL92 and trace (25). */
final class FeatureScenarios {
    private FeatureScenarios() {
    }

    /** A committed and a rolled-back half message: only the committed one is ever consumed. */
    static Map<String, Object> transaction(Ctx c) throws Exception {
        String topic = c.name("tx");
        c.createTopic(topic, 4);
        TransactionMQProducer p = c.startTransactional(new TransactionMQProducer(c.name("txP")), new TransactionListener() {
            @Override public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return "commit".equals(arg) ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }
            @Override public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return "commit".equals(msg.getUserProperty("want"))
                    ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            for (String want : new String[] {"commit", "rollback"}) {
                Message m = new Message(topic, want.getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("want", want);
                TransactionSendResult r = p.sendMessageInTransaction(m, want);
                out.put(want + "Status", r.getSendStatus().name());
                out.put(want + "State", r.getLocalTransactionState().name());
            }
            List<String> bodies = new ArrayList<>();
            for (MessageExt m : c.readAll(topic, 4, 1, 10000)) bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
            Thread.sleep(1000);
            bodies.clear();
            for (MessageExt m : c.readAll(topic, 4, 2, 1000)) bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
            out.put("visible", bodies);
        } finally {
            p.shutdown();
        }
        return out;
    }

    /** DefaultMQProducer.request: a consumer replies with MessageUtil.createReplyMessage. */
    static Map<String, Object> requestReply(Ctx c) throws Exception {
        String topic = c.name("rr");
        c.createTopic(topic, 4);
        DefaultMQProducer replier = c.producer(c.name("rrReplyP"));
        DefaultMQPushConsumer pc = c.push(c.name("rrG"));
        pc.subscribe(topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    Message reply = MessageUtil.createReplyMessage(m,
                        ("re: " + new String(m.getBody(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8));
                    replier.send(reply, 5000);
                } catch (Exception e) {
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        DefaultMQProducer requester = c.producer(c.name("rrP"));
        Thread.sleep(1000);
        Message reply = requester.request(new Message(topic, "ping".getBytes(StandardCharsets.UTF_8)), 10000);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("reply", reply == null ? null : new String(reply.getBody(), StandardCharsets.UTF_8));
        return out;
    }

    /** MessageSelector.bySql("a > 5"): exactly a = 6..9 delivered. */
    static Map<String, Object> sql92(Ctx c) throws Exception {
        String topic = c.name("sql");
        c.createTopic(topic, 4);
        Set<Integer> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer pc = c.push(c.name("sqlG"));
        pc.subscribe(topic, MessageSelector.bySql("a > 5"));
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) got.add(Integer.parseInt(m.getUserProperty("a")));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        DefaultMQProducer p = c.producer(c.name("sqlP"));
        for (int a = 0; a < 10; a++) {
            Message m = new Message(topic, ("a=" + a).getBytes(StandardCharsets.UTF_8));
            m.putUserProperty("a", Integer.toString(a));
            p.send(m);
        }
        Ctx.await(20000, () -> got.size() >= 4);
        Thread.sleep(1000);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("got", new TreeSet<>(got));
        return out;
    }

    /** enableMsgTrace on producer and consumer: Pub, SubBefore and SubAfter records in RMQ_SYS_TRACE_TOPIC. */
    @SuppressWarnings("deprecation")
    static Map<String, Object> trace(Ctx c) throws Exception {
        String topic = c.name("trace");
        c.createTopic(topic, 4);
        DefaultMQPushConsumer pc = new DefaultMQPushConsumer(c.name("traceG"), true);
        pc.setNamesrvAddr(c.namesrv);
        pc.setInstanceName(c.instance());
        pc.subscribe(topic, "*");
        Set<String> consumed = ConcurrentHashMap.newKeySet();
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) consumed.add(m.getMsgId());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        DefaultMQProducer p = new DefaultMQProducer(c.name("traceP"), true);
        p.setNamesrvAddr(c.namesrv);
        p.setInstanceName(c.instance());
        p.start();
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            SendResult r = p.send(new Message(topic, "TagT", "traceKey", "traced".getBytes(StandardCharsets.UTF_8)));
            String id = r.getMsgId();
            Ctx.await(15000, () -> consumed.contains(id));
            Set<String> kinds = new TreeSet<>();
            for (List<String> rec : traceRecords(c, id, 3, 20000)) kinds.add(rec.get(0));
            out.put("consumed", consumed.contains(id));
            out.put("msgId", id);
            out.put("traceKinds", kinds);
        } finally {
            p.shutdown();
            pc.shutdown();
        }
        return out;
    }

    /**
     * enableMsgTrace on a TransactionMQProducer (Pub of the half message, EndTransaction of
     * the local commit) and on a DefaultLitePullConsumer (SubBefore / SubAfter per pulled
     * message): every trace record about the message, split into its fields.
     */
    static Map<String, Object> traceTxnLite(Ctx c) throws Exception {
        String topic = c.name("trtx");
        c.createTopic(topic, 4);
        TransactionMQProducer p = c.startTransactional(new TransactionMQProducer(null, c.name("trtxP"), null, true, null),
            Ctx.fixedStates(LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.COMMIT_MESSAGE));
        DefaultLitePullConsumer lite = c.litePull(c.name("trtxL"));
        lite.setEnableMsgTrace(true);
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            TransactionSendResult r = p.sendMessageInTransaction(
                new Message(topic, "TagX", "kx", "traced".getBytes(StandardCharsets.UTF_8)), null);
            String id = r.getMsgId();
            lite.subscribe(topic, "*");
            lite.start();
            boolean polled = false;
            long until = System.currentTimeMillis() + 20000;
            while (!polled && System.currentTimeMillis() < until) {
                for (MessageExt m : lite.poll(500)) polled |= id.equals(m.getMsgId());
            }
            out.put("polled", polled);
            out.put("msgId", id);
            out.put("producerGroup", p.getProducerGroup());
            out.put("consumerGroup", lite.getConsumerGroup());
            out.put("topic", topic);
            out.put("records", traceRecords(c, id, 4, 20000));
        } finally {
            p.shutdown();
        }
        return out;
    }

    /** The trace records (fields split) about {@code id} in RMQ_SYS_TRACE_TOPIC, once {@code want} are there. */
    @SuppressWarnings("deprecation")
    private static List<List<String>> traceRecords(Ctx c, String id, int want, long timeoutMs) throws Exception {
        DefaultMQPullConsumer reader = c.pullConsumer(c.name("traceReader" + c.instance()));
        List<List<String>> records = new ArrayList<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            records.clear();
            for (MessageQueue mq : reader.fetchSubscribeMessageQueues(TopicValidator.RMQ_SYS_TRACE_TOPIC)) {
                long offset = 0;
                while (true) {
                    PullResult pr = reader.pull(mq, "*", offset, 32, 5000);
                    if (pr.getPullStatus() != PullStatus.FOUND) break;
                    for (MessageExt m : pr.getMsgFoundList()) {
                        String body = new String(m.getBody(), StandardCharsets.UTF_8);
                        for (String rec : body.split(String.valueOf((char) 2))) {
                            List<String> fields = Arrays.asList(rec.split(String.valueOf((char) 1), -1));
                            if (fields.contains(id)) records.add(fields);
                        }
                    }
                    offset = pr.getNextBeginOffset();
                }
            }
            if (records.size() >= want) break;
            Thread.sleep(500);
        }
        return records;
    }
}
