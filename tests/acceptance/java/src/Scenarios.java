import java.util.LinkedHashMap;
import java.util.Map;

/** Every scenario by name (the names the pytest side asks for). */
final class Scenarios {
    private Scenarios() {
    }

    static Map<String, Scenario> all() {
        Map<String, Scenario> m = new LinkedHashMap<>();
        // the client (ClientScenarios)
        m.put("send_modes", ClientScenarios::sendModes);
        m.put("stored_props", ClientScenarios::storedProps);
        m.put("push_clustering", ClientScenarios::pushClustering);
        m.put("push_broadcast", ClientScenarios::pushBroadcast);
        m.put("push_orderly", ClientScenarios::pushOrderly);
        m.put("tag_filter", ClientScenarios::tagFilter);
        m.put("reconsume_later", ClientScenarios::reconsumeLater);
        m.put("delay_levels", ClientScenarios::delayLevels);
        m.put("lite_pull_subscribe", ClientScenarios::litePullSubscribe);
        m.put("lite_pull_assign", ClientScenarios::litePullAssign);
        m.put("pull_consumer", ClientScenarios::pullConsumer);
        m.put("max_size", ClientScenarios::maxSize);
        m.put("vip_channel", ClientScenarios::vipChannel);
        // DefaultMQAdminExt (AdminScenarios)
        m.put("admin_topic", AdminScenarios::topicAdmin);
        m.put("admin_cluster", AdminScenarios::clusterInfo);
        m.put("admin_runtime_stats", AdminScenarios::runtimeStats);
        m.put("admin_topic_stats", AdminScenarios::topicStats);
        m.put("admin_consume_stats", AdminScenarios::consumeStats);
        m.put("admin_consumer_connection", AdminScenarios::consumerConnection);
        m.put("admin_producer_connection", AdminScenarios::producerConnection);
        m.put("admin_view_message", AdminScenarios::viewMessage);
        m.put("admin_query_by_key", AdminScenarios::queryByKey);
        m.put("admin_query_by_unique_key", AdminScenarios::queryByUniqueKey);
        m.put("admin_search_offset", AdminScenarios::searchOffset);
        m.put("admin_earliest_time", AdminScenarios::earliestTime);
        m.put("admin_reset_offset", AdminScenarios::resetOffset);
        m.put("admin_sub_group", AdminScenarios::subGroup);
        m.put("admin_broker_config", AdminScenarios::brokerConfig);
        m.put("admin_system_topics", AdminScenarios::systemTopics);
        m.put("admin_producer_info", AdminScenarios::producerInfo);
        m.put("admin_consumer_status", AdminScenarios::consumerStatus);
        m.put("admin_correction_offset", AdminScenarios::correctionOffset);
        m.put("admin_resume_half", AdminScenarios::resumeHalf);
        m.put("admin_clean_calls", AdminScenarios::cleanCalls);
        // mqadmin's sub-commands (run one after another)
        m.putAll(AdminScenarios.mqadminScenarios());
        // features other issues own (FeatureScenarios)
        m.put("transaction", FeatureScenarios::transaction);
        m.put("request_reply", FeatureScenarios::requestReply);
        m.put("sql92", FeatureScenarios::sql92);
        m.put("trace", FeatureScenarios::trace);
        return m;
    }

    /** Scenarios that need --param values (not in "all"): the HA and cluster tests' steps. */
    static Map<String, Scenario> parametrized() {
        Map<String, Scenario> m = new LinkedHashMap<>();
        m.put("produce", StepScenarios::produce);
        m.put("consume", StepScenarios::consume);
        m.put("acl_probe", AclScenarios::aclProbes);
        m.put("tls_probe", AclScenarios::tlsProbe);
        // a running consumer's GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309)
        m.put("consumer_status", c -> AdminScenarios.mqadmin(
            new org.apache.rocketmq.tools.command.consumer.ConsumerStatusSubCommand(),
            "-n", c.namesrv, "-g", c.params.get("group"), "-i", c.params.get("clientId")));
        m.put("consume_directly", c -> AdminScenarios.mqadmin(
            new org.apache.rocketmq.tools.command.message.QueryMsgByIdSubCommand(),
            "-n", c.namesrv, "-i", c.params.get("msgId"), "-g", c.params.get("group"), "-d", c.params.get("clientId")));
        // trace of a transaction's end and of a lite pull consumer, on test_java_transactions' brokers
        m.put("trace_txn_lite", FeatureScenarios::traceTxnLite);
        m.put("query_msg_trace", c -> AdminScenarios.mqadmin(
            new org.apache.rocketmq.tools.command.message.QueryMsgTraceByIdSubCommand(),
            "-n", c.namesrv, "-i", c.params.get("msgId")));
        return m;
    }
}
