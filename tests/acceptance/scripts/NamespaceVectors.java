// Java 4.9.8's NamespaceUtil over a grid of namespaces and names; prints the vectors
// tests/codecs/data/namespace_vectors.json holds (tests/codecs/test_namespace.py checks
// trocket's codecs/namespace.py against them and re-runs this program when Java is here).
// Usage: . shared/rocketmq-4.9.8/env.sh; javac -cp "$CP" -d OUT NamespaceVectors.java;
//        $JAVA -cp "$CP:OUT" NamespaceVectors > tests/codecs/data/namespace_vectors.json
import java.util.*;

import com.alibaba.fastjson.JSON;

import org.apache.rocketmq.common.protocol.NamespaceUtil;

public class NamespaceVectors {
    public static void main(String[] args) {
        String[] namespaces = {"", "ns", "ns1", "a_b-c", "ns%x"};
        String[] names = {"", "TopicA", "GroupB", "ns%TopicA", "ns1%TopicA", "other%TopicA", "%RETRY%GroupB",
            "%RETRY%ns%GroupB", "%DLQ%GroupB", "%DLQ%ns1%GroupB", "TBW102", "SCHEDULE_TOPIC_XXXX",
            "RMQ_SYS_TRACE_TOPIC", "rmq_sys_anything", "CID_RMQ_SYS_TRANS", "%RETRY%CID_RMQ_SYS_X",
            "%TopicA", "a%b%c", "%RETRY%", "ns", "ns%"};
        List<Object> rows = new ArrayList<>();
        for (String ns : namespaces) {
            for (String name : names) {
                rows.add(Arrays.asList("wrap", ns, name, NamespaceUtil.wrapNamespace(ns, name)));
                rows.add(Arrays.asList("without", ns, name, NamespaceUtil.withoutNamespace(name, ns)));
                rows.add(Arrays.asList("already", ns, name, NamespaceUtil.isAlreadyWithNamespace(name, ns)));
                if (!name.isEmpty()) {
                    rows.add(Arrays.asList("retry", ns, name, NamespaceUtil.wrapNamespaceAndRetry(ns, name)));
                }
            }
        }
        for (String name : names) {
            rows.add(Arrays.asList("without_any", null, name, NamespaceUtil.withoutNamespace(name)));
        }
        StringBuilder out = new StringBuilder("[\n");  // one row a line
        for (int i = 0; i < rows.size(); i++) {
            out.append(JSON.toJSONString(rows.get(i))).append(i + 1 < rows.size() ? ",\n" : "\n");
        }
        System.out.print(out.append("]\n"));
    }
}
