import java.util.Map;

/** One acceptance scenario: runs against the broker in {@link Ctx}, returns its facts. */
@FunctionalInterface
interface Scenario {
    Map<String, Object> run(Ctx ctx) throws Exception;
}
