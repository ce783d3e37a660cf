// Java 4.9.8's queue allocation strategies run over fixed inputs; prints the vectors
// tests/client/data/allocate_vectors.json holds (tests/client/test_allocate_strategies.py
// checks trocket's strategies against them, and re-runs this program when Java is here).
// Each case: the queues and client ids (sorted, as RebalanceImpl hands them over), a
// strategy, and every client's allocation.
// Usage: . shared/rocketmq-4.9.8/env.sh; javac -cp "$CP" -d OUT AllocateVectors.java;
//        $JAVA -cp "$CP:OUT" AllocateVectors > tests/client/data/allocate_vectors.json
import java.util.*;

import com.alibaba.fastjson.JSON;

import org.apache.rocketmq.client.consumer.AllocateMessageQueueStrategy;
import org.apache.rocketmq.client.consumer.rebalance.*;
import org.apache.rocketmq.common.message.MessageQueue;

public class AllocateVectors {
    static List<MessageQueue> queues(String topic, String[] brokers, int perBroker) {
        List<MessageQueue> out = new ArrayList<>();
        for (String b : brokers) {
            for (int q = 0; q < perBroker; q++) {
                out.add(new MessageQueue(topic, b, q));
            }
        }
        Collections.sort(out);
        return out;
    }

    static List<Object> mqJson(List<MessageQueue> mqs) {
        List<Object> out = new ArrayList<>();
        for (MessageQueue mq : mqs) {
            out.add(Arrays.asList(mq.getTopic(), mq.getBrokerName(), mq.getQueueId()));
        }
        return out;
    }

    static Map<String, Object> run(String name, AllocateMessageQueueStrategy s, Map<String, Object> params,
                                   List<MessageQueue> mqs, List<String> cids) {
        Collections.sort(cids);
        Map<String, Object> alloc = new LinkedHashMap<>();
        for (String cid : cids) {
            alloc.put(cid, mqJson(s.allocate("G", cid, mqs, cids)));
        }
        Map<String, Object> c = new LinkedHashMap<>();
        c.put("case", name);
        c.put("strategy", s.getName());
        c.put("params", params);
        c.put("queues", mqJson(mqs));
        c.put("cids", cids);
        c.put("allocation", alloc);
        return c;
    }

    public static void main(String[] args) {
        List<Map<String, Object>> cases = new ArrayList<>();
        Map<String, List<MessageQueue>> inputs = new LinkedHashMap<>();
        Map<String, List<String>> clients = new LinkedHashMap<>();
        inputs.put("8q-3c", queues("TopicA", new String[] {"broker-a"}, 8));
        clients.put("8q-3c", Arrays.asList("10.0.0.1@1001", "10.0.0.2@1002", "10.0.0.3@1003"));
        inputs.put("2x4q-3c", queues("TopicB", new String[] {"broker-b", "broker-a"}, 4));
        clients.put("2x4q-3c", Arrays.asList("192.168.1.7@77", "192.168.1.5@55", "192.168.1.6@66"));
        inputs.put("5q-7c", queues("%RETRY%GroupX", new String[] {"broker-a"}, 5));
        clients.put("5q-7c", Arrays.asList("c1", "c2", "c3", "c4", "c5", "c6", "c7"));
        inputs.put("3x6q-4c", queues("Orders", new String[] {"bk-1", "bk-2", "bk-3"}, 6));
        clients.put("3x6q-4c", Arrays.asList("172.17.0.2@9@a", "172.17.0.3@9@b", "172.17.0.4@9@c", "172.17.0.5@9@d"));
        for (String in : inputs.keySet()) {
            List<MessageQueue> mqs = inputs.get(in);
            List<String> cids = new ArrayList<>(clients.get(in));
            cases.add(run(in, new AllocateMessageQueueAveragely(), new LinkedHashMap<>(), mqs, cids));
            cases.add(run(in, new AllocateMessageQueueAveragelyByCircle(), new LinkedHashMap<>(), mqs, cids));
            for (int vnodes : new int[] {10, 3, 1}) {
                Map<String, Object> p = new LinkedHashMap<>();
                p.put("virtual_nodes", vnodes);
                cases.add(run(in, new AllocateMessageQueueConsistentHash(vnodes), p, mqs, cids));
            }
            AllocateMessageQueueByConfig byConfig = new AllocateMessageQueueByConfig();
            List<MessageQueue> fixed = Arrays.asList(mqs.get(mqs.size() - 1), mqs.get(0));
            byConfig.setMessageQueueList(fixed);
            Map<String, Object> p = new LinkedHashMap<>();
            p.put("queues", mqJson(fixed));
            cases.add(run(in, byConfig, p, mqs, cids));
        }
        // machine rooms: broker names "<room>@<name>", client ids "<room>@<id>"
        List<MessageQueue> roomMqs = queues("Rooms", new String[] {"IDC1@broker-a", "IDC2@broker-b", "IDC3@broker-c",
            "broker-d"}, 3);
        List<String> roomCids = new ArrayList<>(Arrays.asList("IDC1@c1", "IDC1@c2", "IDC2@c3", "IDC4@c4", "IDC2@c5"));
        AllocateMessageQueueByMachineRoom byRoom = new AllocateMessageQueueByMachineRoom();
        byRoom.setConsumeridcs(new HashSet<>(Arrays.asList("IDC1", "IDC3")));
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("consumer_idcs", Arrays.asList("IDC1", "IDC3"));
        cases.add(run("rooms", byRoom, p, roomMqs, roomCids));
        List<MessageQueue> nearMqs = queues("Rooms", new String[] {"IDC1@broker-a", "IDC2@broker-b", "IDC3@broker-c"}, 3);
        AllocateMachineRoomNearby.MachineRoomResolver resolver = new AllocateMachineRoomNearby.MachineRoomResolver() {
            public String brokerDeployIn(MessageQueue mq) {
                return mq.getBrokerName().split("@")[0];
            }

            public String consumerDeployIn(String cid) {
                return cid.split("@")[0];
            }
        };
        for (AllocateMessageQueueStrategy inner : new AllocateMessageQueueStrategy[] {
            new AllocateMessageQueueAveragely(), new AllocateMessageQueueAveragelyByCircle(),
            new AllocateMessageQueueConsistentHash()}) {
            cases.add(run("rooms-nearby", new AllocateMachineRoomNearby(inner, resolver), new LinkedHashMap<>(),
                nearMqs, new ArrayList<>(roomCids)));
        }
        StringBuilder out = new StringBuilder("[\n");  // one case a line
        for (int i = 0; i < cases.size(); i++) {
            out.append(JSON.toJSONString(cases.get(i))).append(i + 1 < cases.size() ? ",\n" : "\n");
        }
        System.out.print(out.append("]\n"));
    }
}
