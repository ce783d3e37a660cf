// A RocketMQ 4.9.8 DefaultMQPushConsumer that prints one line per message it consumes
// ("MSG <queueId> <queueOffset> <body>") and keeps running until its stdin closes:
// the acceptance tests watch what it consumes while they administer the broker.
// Usage: PushConsumerProbe NAMESRV TOPIC GROUP CLIENT_INSTANCE
import java.nio.charset.StandardCharsets;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;

public class PushConsumerProbe {
    public static void main(String[] args) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args[2]);
        consumer.setNamesrvAddr(args[0]);
        consumer.setInstanceName(args[3]);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.subscribe(args[1], "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            synchronized (System.out) {
                for (MessageExt m : msgs) {
                    System.out.println("MSG " + m.getQueueId() + " " + m.getQueueOffset() + " "
                        + new String(m.getBody(), StandardCharsets.UTF_8));
                }
                System.out.flush();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        System.out.println("STARTED " + consumer.getDefaultMQPushConsumerImpl().getmQClientFactory().getClientId());
        System.out.flush();
        while (System.in.read() >= 0) {
            // runs until the test closes stdin
        }
        consumer.shutdown();
        System.out.println("STOPPED");
        System.out.flush();
        System.exit(0);
    }
}
