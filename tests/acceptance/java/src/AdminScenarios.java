import org.apache.commons.cli.CommandLine;
import org.apache.commons.cli.Options;
import org.apache.commons.cli.PosixParser;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.protocol.body.ConsumeQueueData;
import org.apache.rocketmq.common.protocol.body.ProducerInfo;
import org.apache.rocketmq.common.protocol.body.ProducerTableInfo;
import org.apache.rocketmq.common.protocol.body.QueryConsumeQueueResponseBody;
import org.apache.rocketmq.common.protocol.body.TopicConfigSerializeWrapper;
import org.apache.rocketmq.common.protocol.header.QueryConsumerOffsetRequestHeader;
import org.apache.rocketmq.tools.command.broker.CleanExpiredCQSubCommand;
import org.apache.rocketmq.tools.command.broker.CleanUnusedTopicCommand;
import org.apache.rocketmq.tools.command.broker.DeleteExpiredCommitLogSubCommand;
import org.apache.rocketmq.tools.command.offset.GetConsumerStatusCommand;
import org.apache.rocketmq.tools.command.producer.ProducerSubCommand;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.admin.ConsumeStats;
import org.apache.rocketmq.common.admin.OffsetWrapper;
import org.apache.rocketmq.common.admin.TopicOffset;
import org.apache.rocketmq.common.admin.TopicStatsTable;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.common.protocol.body.Connection;
import org.apache.rocketmq.common.protocol.body.ConsumerConnection;
import org.apache.rocketmq.common.protocol.body.KVTable;
import org.apache.rocketmq.common.protocol.body.ProducerConnection;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.common.subscription.SubscriptionGroupConfig;
import org.apache.rocketmq.srvutil.ServerUtil;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
import org.apache.rocketmq.tools.command.SubCommand;
import org.apache.rocketmq.tools.command.broker.BrokerStatusSubCommand;
import org.apache.rocketmq.tools.command.broker.GetBrokerConfigCommand;
import org.apache.rocketmq.tools.command.broker.UpdateBrokerConfigSubCommand;
import org.apache.rocketmq.tools.command.cluster.ClusterListSubCommand;
import org.apache.rocketmq.tools.command.connection.ConsumerConnectionSubCommand;
import org.apache.rocketmq.tools.command.connection.ProducerConnectionSubCommand;
import org.apache.rocketmq.tools.command.consumer.ConsumerProgressSubCommand;
import org.apache.rocketmq.tools.command.consumer.DeleteSubscriptionGroupCommand;
import org.apache.rocketmq.tools.command.consumer.UpdateSubGroupSubCommand;
import org.apache.rocketmq.tools.command.message.QueryMsgByIdSubCommand;
import org.apache.rocketmq.tools.command.message.QueryMsgByKeySubCommand;
import org.apache.rocketmq.tools.command.message.QueryMsgByOffsetSubCommand;
import org.apache.rocketmq.tools.command.message.QueryMsgByUniqueKeySubCommand;
import org.apache.rocketmq.tools.command.offset.ResetOffsetByTimeCommand;
import org.apache.rocketmq.tools.command.stats.StatsAllSubCommand;
import org.apache.rocketmq.tools.command.topic.DeleteTopicSubCommand;
import org.apache.rocketmq.tools.command.topic.TopicListSubCommand;
import org.apache.rocketmq.tools.command.topic.TopicRouteSubCommand;
import org.apache.rocketmq.tools.command.topic.TopicStatusSubCommand;
import org.apache.rocketmq.tools.command.topic.UpdateTopicSubCommand;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * DefaultMQAdminExt calls and mqadmin's sub-commands against the broker under test,
 * over one shared "world": a topic with 8 keyed messages, its producer still online,
 * a consumer group that consumed them all (offsets committed) and is still online.
 */
final class AdminScenarios {
    private AdminScenarios() {
    }

    static final int WORLD_MESSAGES = 8;

    static final class World {
        String topic;
        String producerGroup;
        String consumerGroup;
        long startMs;
        final List<SendResult> sent = new ArrayList<>();
    }

    private static World world;

    static synchronized World world(Ctx c) throws Exception {
        if (world != null) return world;
        World w = new World();
        w.topic = c.name("adm");
        w.producerGroup = c.name("admP");
        w.consumerGroup = c.name("admG");
        w.startMs = System.currentTimeMillis() - 1000;
        c.createTopic(w.topic, 4);
        DefaultMQProducer p = c.producer(w.producerGroup);
        for (int i = 0; i < WORLD_MESSAGES; i++) {
            Message m = new Message(w.topic, "TagW", "admk" + i, ("world " + i).getBytes(StandardCharsets.UTF_8));
            w.sent.add(p.send(m));
        }
        AtomicInteger consumed = new AtomicInteger();
        DefaultMQPushConsumer pc = c.push(w.consumerGroup);
        pc.subscribe(w.topic, "*");
        pc.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            consumed.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        pc.start();
        Ctx.waitFor(30000, () -> consumed.get() >= WORLD_MESSAGES, "the world's consumer");
        Thread.sleep(300);
        pc.getDefaultMQPushConsumerImpl().persistConsumerOffset();
        // the producer's heartbeat (so it shows as connected): sent at start only to known brokers
        p.getDefaultMQProducerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();
        Thread.sleep(1000); // the offset commits are oneway
        world = w;
        return w;
    }

    // -- DefaultMQAdminExt -----------------------------------------------------------------

    static Map<String, Object> topicAdmin(Ctx c) throws Exception {
        DefaultMQAdminExt a = c.admin();
        String topic = c.name("admTopic");
        Map<String, Object> out = new LinkedHashMap<>();
        a.createAndUpdateTopicConfig(c.brokerAddr, new TopicConfig(topic, 8, 8, 6));
        Ctx.await(15000, () -> c.routeQueues(topic) == 8);
        out.put("routeQueues", c.routeQueues(topic));
        out.put("inTopicList", a.fetchAllTopicList().getTopicList().contains(topic));
        Set<String> addrs = Collections.singleton(c.brokerAddr);
        a.deleteTopicInBroker(addrs, topic);
        Set<String> ns = Collections.singleton(c.namesrv);
        a.deleteTopicInNameServer(ns, topic, c.cluster);
        out.put("routeAfterDelete", c.routeQueues(topic));
        out.put("inTopicListAfterDelete", a.fetchAllTopicList().getTopicList().contains(topic));
        return out;
    }

    static Map<String, Object> clusterInfo(Ctx c) throws Exception {
        ClusterInfo ci = c.admin().examineBrokerClusterInfo();
        Map<String, Object> out = new LinkedHashMap<>();
        BrokerData bd = ci.getBrokerAddrTable().get(c.brokerName);
        out.put("master", bd == null ? null : bd.getBrokerAddrs().get(0L));
        out.put("cluster", bd == null ? null : bd.getCluster());
        out.put("clusterBrokers", ci.getClusterAddrTable().get(c.cluster));
        return out;
    }

    static Map<String, Object> runtimeStats(Ctx c) throws Exception {
        World w = world(c);
        KVTable t = c.admin().fetchBrokerRuntimeStats(c.brokerAddr);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("table", new TreeMap<>(t.getTable()));
        out.put("worldMessages", w.sent.size());
        return out;
    }

    static Map<String, Object> topicStats(Ctx c) throws Exception {
        World w = world(c);
        TopicStatsTable t = c.admin().examineTopicStats(w.topic);
        long total = 0;
        Map<String, Object> queues = new TreeMap<>();
        for (Map.Entry<MessageQueue, TopicOffset> e : t.getOffsetTable().entrySet()) {
            total += e.getValue().getMaxOffset() - e.getValue().getMinOffset();
            queues.put(Integer.toString(e.getKey().getQueueId()), e.getValue().getMaxOffset());
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("queues", queues);
        out.put("messages", total);
        return out;
    }

    static Map<String, Object> consumeStats(Ctx c) throws Exception {
        World w = world(c);
        ConsumeStats cs = c.admin().examineConsumeStats(w.consumerGroup);
        long broker = 0;
        long consumer = 0;
        int queues = 0;
        for (Map.Entry<MessageQueue, OffsetWrapper> e : cs.getOffsetTable().entrySet()) {
            if (!e.getKey().getTopic().equals(w.topic)) continue; // (and its %RETRY% queue, once it has an offset)
            queues++;
            broker += e.getValue().getBrokerOffset();
            consumer += e.getValue().getConsumerOffset();
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("queues", queues);
        out.put("brokerOffsets", broker);
        out.put("consumerOffsets", consumer);
        out.put("diff", cs.computeTotalDiff());
        return out;
    }

    static Map<String, Object> consumerConnection(Ctx c) throws Exception {
        World w = world(c);
        ConsumerConnection cc = c.admin().examineConsumerConnectionInfo(w.consumerGroup);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("connections", cc.getConnectionSet().size());
        out.put("subscriptions", new TreeSet<>(cc.getSubscriptionTable().keySet()));
        out.put("consumeType", String.valueOf(cc.getConsumeType()));
        out.put("messageModel", String.valueOf(cc.getMessageModel()));
        List<String> langs = new ArrayList<>();
        for (Connection conn : cc.getConnectionSet()) langs.add(String.valueOf(conn.getLanguage()));
        out.put("languages", langs);
        return out;
    }

    static Map<String, Object> producerConnection(Ctx c) throws Exception {
        World w = world(c);
        ProducerConnection pc = c.admin().examineProducerConnectionInfo(w.producerGroup, w.topic);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("connections", pc.getConnectionSet().size());
        return out;
    }

    static Map<String, Object> viewMessage(Ctx c) throws Exception {
        World w = world(c);
        SendResult sr = w.sent.get(3);
        MessageExt m = c.admin().viewMessage(sr.getOffsetMsgId());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("body", new String(m.getBody(), StandardCharsets.UTF_8));
        out.put("keys", m.getKeys());
        out.put("uniqKey", m.getProperty("UNIQ_KEY"));
        out.put("expectedUniqKey", sr.getMsgId());
        return out;
    }

    static Map<String, Object> queryByKey(Ctx c) throws Exception {
        World w = world(c);
        QueryResult qr = c.admin().queryMessage(w.topic, "admk5", 32, w.startMs, System.currentTimeMillis() + 60000);
        List<String> bodies = new ArrayList<>();
        for (MessageExt m : qr.getMessageList()) bodies.add(new String(m.getBody(), StandardCharsets.UTF_8));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("bodies", bodies);
        return out;
    }

    static Map<String, Object> queryByUniqueKey(Ctx c) throws Exception {
        World w = world(c);
        SendResult sr = w.sent.get(6);
        MessageExt m = c.admin().viewMessage(w.topic, sr.getMsgId());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("body", m == null ? null : new String(m.getBody(), StandardCharsets.UTF_8));
        return out;
    }

    static Map<String, Object> searchOffset(Ctx c) throws Exception {
        World w = world(c);
        DefaultMQAdminExt a = c.admin();
        Map<String, Object> out = new LinkedHashMap<>();
        long max = 0;
        long fromStart = 0;
        long fromFuture = 0;
        for (MessageQueue mq : c.queues(w.topic, 4)) {
            max += a.maxOffset(mq);
            out.put("min" + mq.getQueueId(), a.minOffset(mq));
            fromStart += a.searchOffset(mq, w.startMs);
            fromFuture += a.searchOffset(mq, System.currentTimeMillis() + 3600_000L);
        }
        out.put("maxOffsets", max);
        out.put("searchFromStart", fromStart);
        out.put("searchFromFuture", fromFuture);
        return out;
    }

    static Map<String, Object> earliestTime(Ctx c) throws Exception {
        World w = world(c);
        long t = c.admin().earliestMsgStoreTime(new MessageQueue(w.topic, c.brokerName, 0));
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("earliest", t);
        out.put("worldStart", w.startMs);
        out.put("now", System.currentTimeMillis());
        return out;
    }

    static Map<String, Object> resetOffset(Ctx c) throws Exception {
        World w = world(c);
        Map<MessageQueue, Long> r = c.admin().resetOffsetByTimestamp(w.topic, w.consumerGroup, w.startMs, true);
        long total = 0;
        for (Long v : r.values()) total += v;
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("queues", r.size());
        out.put("offsetsSum", total);
        return out;
    }

    static Map<String, Object> subGroup(Ctx c) throws Exception {
        DefaultMQAdminExt a = c.admin();
        String group = c.name("subG");
        SubscriptionGroupConfig cfg = new SubscriptionGroupConfig();
        cfg.setGroupName(group);
        cfg.setRetryMaxTimes(3);
        a.createAndUpdateSubscriptionGroupConfig(c.brokerAddr, cfg);
        SubscriptionGroupConfig back = a.examineSubscriptionGroupConfig(c.brokerAddr, group);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("retryMaxTimes", back == null ? null : back.getRetryMaxTimes());
        a.deleteSubscriptionGroup(c.brokerAddr, group);
        SubscriptionGroupConfig gone = null;
        try {
            gone = a.examineSubscriptionGroupConfig(c.brokerAddr, group);
        } catch (Exception e) {
            out.put("afterDelete", e.getClass().getSimpleName());
        }
        out.put("presentAfterDelete", gone != null);
        return out;
    }

    static Map<String, Object> brokerConfig(Ctx c) throws Exception {
        DefaultMQAdminExt a = c.admin();
        Properties before = a.getBrokerConfig(c.brokerAddr);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("brokerName", before.getProperty("brokerName"));
        out.put("brokerClusterName", before.getProperty("brokerClusterName"));
        out.put("maxMessageSize", before.getProperty("maxMessageSize"));
        out.put("fileReservedTimeBefore", before.getProperty("fileReservedTime"));
        Properties change = new Properties();
        change.setProperty("fileReservedTime", "49");
        a.updateBrokerConfig(c.brokerAddr, change);
        out.put("fileReservedTimeAfter", a.getBrokerConfig(c.brokerAddr).getProperty("fileReservedTime"));
        Properties back = new Properties();
        back.setProperty("fileReservedTime", String.valueOf(before.getProperty("fileReservedTime")));
        a.updateBrokerConfig(c.brokerAddr, back);
        return out;
    }


    // -- the last eight codes: 305, 328, 223, 308, 323, 316, 306, 329 ----------------------

    /** The broker's calls DefaultMQAdminExt has no method for, through a client's MQClientAPIImpl. */
    private static MQClientAPIImpl api(Ctx c) throws MQClientException {
        return c.producer(c.name("apiP")).getDefaultMQProducerImpl().getmQClientFactory().getMQClientAPIImpl();
    }

    /** GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305), and getUserTopicConfig, which leaves them out. */
    static Map<String, Object> systemTopics(Ctx c) throws Exception {
        World w = world(c);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("systemTopics", new TreeSet<>(api(c).getSystemTopicListFromBroker(c.brokerAddr, 5000).getTopicList()));
        TopicConfigSerializeWrapper user = c.admin().getUserTopicConfig(c.brokerAddr, false, 5000);
        Set<String> topics = user.getTopicConfigTable().keySet();
        out.put("userHasWorldTopic", topics.contains(w.topic));
        out.put("userHasSystemTopic", topics.contains("TBW102") || topics.contains("SCHEDULE_TOPIC_XXXX")
            || topics.contains(c.cluster) || topics.contains(c.brokerName));
        return out;
    }

    /** GET_ALL_PRODUCER_INFO (328): the world's producer among every producer of the broker. */
    static Map<String, Object> producerInfo(Ctx c) throws Exception {
        World w = world(c);
        long before = System.currentTimeMillis();
        ProducerTableInfo t = c.admin().getAllProducerInfo(c.brokerAddr);
        Map<String, Object> out = new LinkedHashMap<>();
        List<ProducerInfo> mine = t.getData().get(w.producerGroup);
        out.put("instances", mine == null ? 0 : mine.size());
        if (mine != null && !mine.isEmpty()) {
            ProducerInfo p = mine.get(0);
            out.put("remoteIpLoopback", p.getRemoteIP().startsWith("/127.0.0.1:"));
            out.put("language", String.valueOf(p.getLanguage()));
            out.put("version", p.getVersion());
            out.put("heartbeatAgeOk", p.getLastUpdateTimestamp() > w.startMs && p.getLastUpdateTimestamp() <= before + 1000);
        }
        out.put("innerProducer", t.getData().containsKey("CLIENT_INNER_PRODUCER"));
        return out;
    }

    /** INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): the broker asks the world's consumer (221). */
    static Map<String, Object> consumerStatus(Ctx c) throws Exception {
        World w = world(c);
        DefaultMQAdminExt a = c.admin();
        Map<String, Object> out = new LinkedHashMap<>();
        // other scenarios reset the world group's offsets meanwhile; its consumer consumes again
        Ctx.waitFor(30000, () -> statusSum(a, w) == WORLD_MESSAGES, "the world consumer's offsets at the end");
        Map<String, Map<MessageQueue, Long>> all = a.getConsumeStatus(w.topic, w.consumerGroup, "");
        out.put("clients", all.size());
        long sum = 0;
        Set<String> topics = new TreeSet<>();
        int queues = 0;
        String clientId = null;
        for (Map.Entry<String, Map<MessageQueue, Long>> e : all.entrySet()) {
            clientId = e.getKey();
            for (Map.Entry<MessageQueue, Long> q : e.getValue().entrySet()) {
                topics.add(q.getKey().getTopic());
                sum += q.getValue();
                queues++;
            }
        }
        out.put("topics", topics);
        out.put("queues", queues);
        out.put("offsetsSum", sum);
        out.put("oneClient", clientId == null ? -1 : a.getConsumeStatus(w.topic, w.consumerGroup, clientId).size());
        out.put("unknownClient", a.getConsumeStatus(w.topic, w.consumerGroup, "no-such-client").size());
        try {
            a.getConsumeStatus(w.topic, c.name("nobodyG"), "");
            out.put("offlineCode", 0);
        } catch (MQClientException e) {
            out.put("offlineCode", e.getResponseCode());
            out.put("offlineRemark", e.getErrorMessage());
        }
        return out;
    }

    private static long statusSum(DefaultMQAdminExt a, World w) {
        try {
            long sum = 0;
            for (Map<MessageQueue, Long> t : a.getConsumeStatus(w.topic, w.consumerGroup, "").values()) {
                for (Long v : t.values()) sum += v;
            }
            return sum;
        } catch (Exception e) {
            return -1;
        }
    }

    /** QUERY_CORRECTION_OFFSET (308) over a topic of its own and three groups' offsets. */
    static Map<String, Object> correctionOffset(Ctx c) throws Exception {
        String topic = c.name("corrT");
        c.createTopic(topic, 2);
        DefaultMQProducer p = c.producer(c.name("corrP"));
        for (int i = 0; i < 3; i++) {
            for (MessageQueue mq : c.queues(topic, 2)) p.send(new Message(topic, "m".getBytes(StandardCharsets.UTF_8)), mq);
        }
        String[] groups = {c.name("corrA"), c.name("corrB"), c.name("corrC")};
        long[][] offsets = {{1, 3}, {2, 0}, {3, 3}};
        DefaultMQAdminExt a = c.admin();
        for (int g = 0; g < groups.length; g++) {
            for (MessageQueue mq : c.queues(topic, 2)) a.updateConsumeOffset(c.brokerAddr, groups[g], mq, offsets[g][mq.getQueueId()]);
        }
        MQClientAPIImpl api = api(c);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("all", byQueue(api.queryCorrectionOffset(c.brokerAddr, topic, groups[0], null, 5000)));
        out.put("withoutB", byQueue(api.queryCorrectionOffset(c.brokerAddr, topic, groups[0],
            Collections.singleton(groups[1]), 5000)));
        out.put("unknownCompared", byQueue(api.queryCorrectionOffset(c.brokerAddr, topic, c.name("nobodyG"),
            Collections.singleton(groups[1]), 5000)));
        // Java's broker removes the filtered groups' offsets from its table as it reads them
        out.put("filteredKept", committedOffset(api, c, topic, groups[1]));
        return out;
    }

    /** Queue id -> offset with string keys (fastjson writes Integer keys unquoted: not JSON). */
    private static Map<String, Long> byQueue(Map<Integer, Long> table) {
        Map<String, Long> out = new TreeMap<>();
        for (Map.Entry<Integer, Long> e : table.entrySet()) out.put(Integer.toString(e.getKey()), e.getValue());
        return out;
    }

    /** The group's committed offset on the topic's queue 0, or -1 when the broker has none. */
    private static long committedOffset(MQClientAPIImpl api, Ctx c, String topic, String group) throws Exception {
        QueryConsumerOffsetRequestHeader h = new QueryConsumerOffsetRequestHeader();
        h.setConsumerGroup(group);
        h.setTopic(topic);
        h.setQueueId(0);
        try {
            return api.queryConsumerOffset(c.brokerAddr, h, 5000);
        } catch (MQBrokerException e) {
            return -1;
        }
    }

    /** RESUME_CHECK_HALF_MESSAGE (323): a young half message put back with TRANSACTION_CHECK_TIMES 0. */
    static Map<String, Object> resumeHalf(Ctx c) throws Exception {
        String topic = c.name("resT");
        c.createTopic(topic, 2);
        TransactionMQProducer p = c.startTransactional(new TransactionMQProducer(c.name("resP")),
            Ctx.fixedStates(LocalTransactionState.UNKNOW, LocalTransactionState.ROLLBACK_MESSAGE));
        Map<String, Object> out = new LinkedHashMap<>();
        try {
            DefaultMQAdminExt a = c.admin();
            MessageQueue half = new MessageQueue("RMQ_SYS_TRANS_HALF_TOPIC", c.brokerName, 0);
            // (a TransactionSendResult carries no offset msgId: the half message is found in its queue)
            String host = world(c).sent.get(0).getOffsetMsgId().substring(0, 16);
            long start = maxOffsetQuietly(a, half);
            TransactionSendResult sr = p.sendMessageInTransaction(
                new Message(topic, "TagR", "resk", "resume me".getBytes(StandardCharsets.UTF_8)), null);
            out.put("state", sr.getLocalTransactionState().name());
            // (other scenarios' half messages share the queue, and Java's broker queues a message
            // after its SEND_OK: wait for this one itself, not for the queue to grow)
            List<MessageExt> firsts = awaitHalfMessages(a, c, host, Math.max(0, start), "resume me",
                "the half message in its queue");
            String offsetId = host + String.format("%016X", firsts.get(0).getCommitLogOffset());
            long before = a.maxOffset(half);
            // (well within transactionTimeOut: no check pass copies it meanwhile)
            out.put("resumed", a.resumeCheckHalfMessage(offsetId));
            List<Map<String, Object>> copies = new ArrayList<>();
            for (MessageExt copy : awaitHalfMessages(a, c, host, before, "resume me", "the resumed copy in the half queue")) {
                Map<String, Object> f = new LinkedHashMap<>();
                f.put("topic", copy.getTopic());
                f.put("queueId", copy.getQueueId());
                f.put("checkTimes", copy.getProperty("TRANSACTION_CHECK_TIMES"));
                f.put("realTopic", copy.getProperty("REAL_TOPIC"));
                f.put("preparedQueueOffset", copy.getProperty("TRAN_PREPARED_QUEUE_OFFSET"));
                copies.add(f);
            }
            out.put("copies", copies);
            out.put("topic", topic);
            out.put("unknownResumed", api(c).resumeCheckHalfMessage(c.brokerAddr,
                host + String.format("%016X", 1L << 40), 5000));
        } finally {
            p.shutdown();
        }
        return out;
    }

    /** The half queue's messages from {@code from} on with this body (others' half messages and check copies share the queue). */
    private static List<MessageExt> halfMessages(DefaultMQAdminExt a, Ctx c, String host, long from, String body)
        throws Exception {
        MessageQueue half = new MessageQueue("RMQ_SYS_TRANS_HALF_TOPIC", c.brokerName, 0);
        long to = a.maxOffset(half);
        List<MessageExt> out = new ArrayList<>();
        if (to <= from) return out;
        QueryConsumeQueueResponseBody q = a.queryConsumeQueue(c.brokerAddr, half.getTopic(), 0, from, (int) (to - from), "resG");
        for (ConsumeQueueData d : q.getQueueData()) {
            MessageExt m = a.viewMessage(host + String.format("%016X", d.getPhysicOffset()));
            if (body.equals(new String(m.getBody(), StandardCharsets.UTF_8))) out.add(m);
        }
        return out;
    }

    /** {@link #halfMessages} once it finds at least one (within 10 s). */
    private static List<MessageExt> awaitHalfMessages(DefaultMQAdminExt a, Ctx c, String host, long from, String body,
        String what) throws Exception {
        List<List<MessageExt>> found = new ArrayList<>();
        Ctx.waitFor(10000, () -> {
            try {
                List<MessageExt> l = halfMessages(a, c, host, from, body);
                if (!l.isEmpty()) found.add(l);
            } catch (Exception e) {
                // not there yet (the half topic may not exist before the first transaction)
            }
            return !found.isEmpty();
        }, what);
        return found.get(0);
    }

    private static long maxOffsetQuietly(DefaultMQAdminExt a, MessageQueue mq) {
        try {
            return a.maxOffset(mq);
        } catch (Exception e) {
            return -1;
        }
    }

    /** CLEAN_UNUSED_TOPIC (316), CLEAN_EXPIRED_CONSUMEQUEUE (306), DELETE_EXPIRED_COMMITLOG (329): the world survives. */
    static Map<String, Object> cleanCalls(Ctx c) throws Exception {
        World w = world(c);
        DefaultMQAdminExt a = c.admin();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("cleanUnusedTopic", a.cleanUnusedTopicByAddr(c.brokerAddr));
        out.put("cleanExpiredCQ", a.cleanExpiredConsumerQueueByAddr(c.brokerAddr));
        out.put("deleteExpiredCommitLog", a.deleteExpiredCommitLogByAddr(c.brokerAddr));
        out.put("cleanUnusedTopicCluster", a.cleanUnusedTopic(c.cluster));
        long max = 0;
        for (MessageQueue mq : c.queues(w.topic, 4)) max += a.maxOffset(mq);
        out.put("worldMessages", max);
        return out;
    }

    // -- mqadmin ---------------------------------------------------------------------------

    /** One mqadmin sub-command, run as MQAdminStartup runs it; its output and outcome. */
    static Map<String, Object> mqadmin(SubCommand cmd, String... args) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("args", args);
        Options options = ServerUtil.buildCommandlineOptions(new Options());
        CommandLine line = ServerUtil.parseCmdLine("mqadmin " + cmd.commandName(), args,
            cmd.buildCommandlineOptions(options), new PosixParser());
        if (line.hasOption('n')) System.setProperty("rocketmq.namesrv.addr", line.getOptionValue('n'));
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        Runner.CAPTURE.set(buf);
        try {
            Thread.sleep(2); // each command names its client instance after the current millisecond
            cmd.execute(line, options, null);
            out.put("failed", false);
        } catch (Throwable e) {
            out.put("failed", true);
            out.put("error", Runner.describe(e));
        } finally {
            Runner.CAPTURE.remove();
        }
        out.put("output", new String(buf.toByteArray(), StandardCharsets.UTF_8));
        return out;
    }

    /** Whether a command's output has a table row whose second column is {@code brokerName}. */
    static boolean hasRowOf(Map<String, Object> result, String brokerName) {
        for (String line : ((String) result.get("output")).split("\n")) {
            String[] cols = line.trim().split("\\s+");
            if (cols.length > 1 && cols[1].equals(brokerName)) return true;
        }
        return false;
    }

    static Map<String, Scenario> mqadminScenarios() {
        Map<String, Scenario> m = new LinkedHashMap<>();
        m.put("mqadmin_updateTopic", c -> {
            String t = c.name("mqaNew");
            Map<String, Object> r = mqadmin(new UpdateTopicSubCommand(), "-n", c.namesrv, "-c", c.cluster, "-t", t,
                "-r", "4", "-w", "4");
            Ctx.await(15000, () -> c.routeQueues(t) == 4);
            r.put("routeQueues", c.routeQueues(t));
            return r;
        });
        m.put("mqadmin_deleteTopic", c -> {
            String t = c.name("mqaDel");
            c.createTopic(t, 4);
            Map<String, Object> r = mqadmin(new DeleteTopicSubCommand(), "-n", c.namesrv, "-c", c.cluster, "-t", t);
            r.put("routeQueues", c.routeQueues(t));
            return r;
        });
        m.put("mqadmin_topicList", c -> onWorld(c, w -> mqadmin(new TopicListSubCommand(), "-n", c.namesrv)));
        m.put("mqadmin_topicRoute", c -> onWorld(c, w -> mqadmin(new TopicRouteSubCommand(), "-n", c.namesrv, "-t", w.topic)));
        m.put("mqadmin_topicStatus", c -> onWorld(c, w -> mqadmin(new TopicStatusSubCommand(), "-n", c.namesrv, "-t", w.topic)));
        m.put("mqadmin_clusterList", c -> onWorld(c, w -> mqadmin(new ClusterListSubCommand(), "-n", c.namesrv)));
        m.put("mqadmin_brokerStatus", c -> onWorld(c, w -> mqadmin(new BrokerStatusSubCommand(), "-n", c.namesrv, "-b", c.brokerAddr)));
        m.put("mqadmin_getBrokerConfig", c -> onWorld(c, w -> mqadmin(new GetBrokerConfigCommand(), "-n", c.namesrv, "-b", c.brokerAddr)));
        m.put("mqadmin_updateBrokerConfig", c -> onWorld(c, w -> mqadmin(new UpdateBrokerConfigSubCommand(), "-n", c.namesrv,
            "-b", c.brokerAddr, "-k", "fileReservedTime", "-v", "48")));
        m.put("mqadmin_consumerProgress", c -> onWorld(c, w -> mqadmin(new ConsumerProgressSubCommand(), "-n", c.namesrv,
            "-g", w.consumerGroup)));
        m.put("mqadmin_consumerConnection", c -> onWorld(c, w -> mqadmin(new ConsumerConnectionSubCommand(), "-n", c.namesrv,
            "-g", w.consumerGroup)));
        m.put("mqadmin_producerConnection", c -> onWorld(c, w -> mqadmin(new ProducerConnectionSubCommand(), "-n", c.namesrv,
            "-g", w.producerGroup, "-t", w.topic)));
        m.put("mqadmin_queryMsgById", c -> onWorld(c, w -> mqadmin(new QueryMsgByIdSubCommand(), "-n", c.namesrv,
            "-i", w.sent.get(1).getOffsetMsgId())));
        m.put("mqadmin_queryMsgByKey", c -> onWorld(c, w -> mqadmin(new QueryMsgByKeySubCommand(), "-n", c.namesrv,
            "-t", w.topic, "-k", "admk2")));
        m.put("mqadmin_queryMsgByUniqueKey", c -> onWorld(c, w -> mqadmin(new QueryMsgByUniqueKeySubCommand(), "-n", c.namesrv,
            "-t", w.topic, "-i", w.sent.get(2).getMsgId())));
        m.put("mqadmin_queryMsgByOffset", c -> onWorld(c, w -> mqadmin(new QueryMsgByOffsetSubCommand(), "-n", c.namesrv,
            "-t", w.topic, "-b", c.brokerName, "-i", Integer.toString(w.sent.get(0).getMessageQueue().getQueueId()),
            "-o", Long.toString(w.sent.get(0).getQueueOffset()))));
        m.put("mqadmin_resetOffsetByTime", c -> onWorld(c, w -> mqadmin(new ResetOffsetByTimeCommand(), "-n", c.namesrv,
            "-g", w.consumerGroup, "-t", w.topic, "-s", "now")));
        m.put("mqadmin_updateSubGroup", c -> onWorld(c, w -> mqadmin(new UpdateSubGroupSubCommand(), "-n", c.namesrv,
            "-c", c.cluster, "-g", c.name("mqaSubG"))));
        m.put("mqadmin_deleteSubGroup", c -> onWorld(c, w -> mqadmin(new DeleteSubscriptionGroupCommand(), "-n", c.namesrv,
            "-c", c.cluster, "-g", c.name("mqaSubG"))));
        m.put("mqadmin_statsAll", c -> onWorld(c, w -> mqadmin(new StatsAllSubCommand(), "-n", c.namesrv, "-t", w.topic)));
        m.put("mqadmin_producer", c -> onWorld(c, w -> mqadmin(new ProducerSubCommand(), "-n", c.namesrv, "-b", c.brokerAddr)));
        // (GetConsumerStatusCommand is not among MQAdminStartup's commands in 4.9.8: run here all the same)
        m.put("mqadmin_getConsumerStatus", c -> onWorld(c, w -> {
            // the Java consumer's resets (other scenarios) hold its request threads 10 s each
            // (MQClientInstance.resetOffset sleeps), and a busy client is left out of the
            // broker's answer: the command again until the consumer is in it (30 s at most)
            long deadline = System.currentTimeMillis() + 30000;
            Map<String, Object> r = mqadmin(new GetConsumerStatusCommand(), "-n", c.namesrv, "-g", w.consumerGroup,
                "-t", w.topic);
            while (!hasRowOf(r, c.brokerName) && System.currentTimeMillis() < deadline) {
                Thread.sleep(500);
                r = mqadmin(new GetConsumerStatusCommand(), "-n", c.namesrv, "-g", w.consumerGroup, "-t", w.topic);
            }
            return r;
        }));
        m.put("mqadmin_cleanUnusedTopic", c -> onWorld(c, w -> mqadmin(new CleanUnusedTopicCommand(), "-n", c.namesrv,
            "-b", c.brokerAddr)));
        m.put("mqadmin_cleanExpiredCQ", c -> onWorld(c, w -> mqadmin(new CleanExpiredCQSubCommand(), "-n", c.namesrv,
            "-c", c.cluster)));
        m.put("mqadmin_deleteExpiredCommitLog", c -> onWorld(c, w -> mqadmin(new DeleteExpiredCommitLogSubCommand(), "-n", c.namesrv,
            "-b", c.brokerAddr)));
        return m;
    }

    interface OnWorld {
        Map<String, Object> run(World w) throws Exception;
    }

    /** A command run once the world exists; the world's names beside its result, for the test. */
    private static Map<String, Object> onWorld(Ctx c, OnWorld cmd) throws Exception {
        World w = world(c);
        Map<String, Object> r = cmd.run(w);
        Map<String, Object> names = new HashMap<>();
        names.put("topic", w.topic);
        names.put("producerGroup", w.producerGroup);
        names.put("consumerGroup", w.consumerGroup);
        List<String> ids = new ArrayList<>();
        List<String> offsetIds = new ArrayList<>();
        for (SendResult sr : w.sent) {
            ids.add(sr.getMsgId());
            offsetIds.add(sr.getOffsetMsgId());
        }
        names.put("msgIds", ids);
        names.put("offsetMsgIds", offsetIds);
        r.put("world", names);
        return r;
    }
}
