import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;

/**
 * ACL (issue 24), one Runner call per broker: {@code acl_probe} with --param tags=T1,T2,...
 * and per credential T ak.T=..., sk.T=... (ak empty: no AclClientRPCHook). The producer, a pull consumer and mqadmin's admin, each
 * signing with the credentials, try what plain_acl.yml allows or refuses; each outcome is
 * "OK ..." or "ERR code remark" (the broker's answer, unwrapped from the client's retries).
 * Also {@code tls_probe}: a send and a pull over whatever TLS the JVM's tls.* properties ask.
 */
final class AclScenarios {
    private AclScenarios() {
    }

    static String outcome(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof MQBrokerException) {
                MQBrokerException b = (MQBrokerException) t;
                return "ERR " + b.getResponseCode() + " " + b.getErrorMessage();
            }
        }
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof MQClientException && ((MQClientException) t).getResponseCode() > 0) {
                MQClientException m = (MQClientException) t;
                return "ERR " + m.getResponseCode() + " " + m.getErrorMessage();
            }
        }
        return "EXC " + e.getClass().getSimpleName();
    }

    interface Action {
        String run() throws Exception;
    }

    static String attempt(Action a) {
        try {
            return a.run();
        } catch (Throwable e) {
            return outcome(e);
        }
    }

    /**
     * Every credential of --param tags=T1,T2,... (with ak.T / sk.T), one after another in
     * the order given, each with clients of its own: {T: its outcomes}.
     */
    static Map<String, Object> aclProbes(Ctx c) throws Exception {
        Map<String, Object> out = new java.util.LinkedHashMap<>();
        for (String tag : c.params.get("tags").split(",")) {
            out.put(tag, aclProbe(c, c.params.getOrDefault("ak." + tag, ""), c.params.getOrDefault("sk." + tag, ""), tag));
        }
        return out;
    }

    static Map<String, Object> aclProbe(Ctx c, String ak, String sk, String tag) throws Exception {
        RPCHook hook = ak.isEmpty() ? null : new AclClientRPCHook(new SessionCredentials(ak, sk));
        Map<String, Object> out = new TreeMap<>();

        DefaultMQProducer p = new DefaultMQProducer(c.name("aclP" + tag), hook);
        p.setNamesrvAddr(c.namesrv);
        p.setInstanceName(c.instance());
        p.setSendMsgTimeout(5000);
        p.setRetryTimesWhenSendFailed(0);
        p.start();
        try {
            for (String topic : new String[] {"topicB", "topicA", "topicC", "topicZ"}) {
                out.put("send " + topic, attempt(() -> {
                    SendResult r = p.send(new Message(topic, "TagA", "acl".getBytes(StandardCharsets.UTF_8)));
                    return "OK " + r.getSendStatus();
                }));
            }
        } finally {
            p.shutdown();
        }

        {
            for (String group : new String[] {"groupB", "groupA"}) {
                DefaultMQPullConsumer g = new DefaultMQPullConsumer(group, hook);
                g.setNamesrvAddr(c.namesrv);
                g.setInstanceName(c.instance());
                g.start();
                try {
                    out.put("pull topicB as " + group, attempt(() -> {
                        PullResult r = g.pull(new MessageQueue("topicB", c.brokerName, 0), "*", 0, 32, 5000);
                        return "OK";  // FOUND or NO_NEW_MSG: which queue the send chose is not ACL's
                    }));
                } finally {
                    g.shutdown();
                }
            }
        }

        DefaultMQAdminExt admin = new DefaultMQAdminExt(hook, 5000);
        admin.setNamesrvAddr(c.namesrv);
        admin.setInstanceName(c.instance());
        admin.setAdminExtGroup(c.name("aclA" + tag));
        admin.start();
        try {
            out.put("create topic", attempt(() -> {
                admin.createAndUpdateTopicConfig(c.brokerAddr, new TopicConfig(c.name("aclT" + tag), 4, 4, 6));
                return "OK";
            }));
        } finally {
            admin.shutdown();
        }
        return out;
    }

    static Map<String, Object> tlsProbe(Ctx c) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        DefaultMQProducer p = c.producer(c.name("tlsP"));
        String topic = c.params.getOrDefault("topic", c.name("TlsTopic"));
        out.put("send", attempt(() -> "OK " + p.send(new Message(topic, "T", "over tls".getBytes(StandardCharsets.UTF_8))).getSendStatus()));
        DefaultMQPullConsumer pc = c.pullConsumer(c.name("tlsC"));
        out.put("pull", attempt(() -> {
            // (Java's broker queues a message for consumers just after its SEND_OK: poll a while)
            long deadline = System.currentTimeMillis() + 5000;
            do {
                for (MessageQueue mq : pc.fetchSubscribeMessageQueues(topic)) {
                    PullResult r = pc.pull(mq, "*", 0, 32, 5000);
                    if (r.getMsgFoundList() != null && !r.getMsgFoundList().isEmpty()) {
                        return "OK " + new String(r.getMsgFoundList().get(0).getBody(), StandardCharsets.UTF_8);
                    }
                }
                Thread.sleep(50);
            } while (System.currentTimeMillis() < deadline);
            return "EMPTY";
        }));
        return out;
    }
}
