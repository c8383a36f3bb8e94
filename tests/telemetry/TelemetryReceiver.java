// A broker-side receiver of client metrics (KIP-714) for
// tests/kafka_telemetry.rs: Kafka hands every PushTelemetry payload to the
// ClientTelemetryReceiver of its metric reporters. This one decodes the
// OTLP MetricsData with the generated classes kafka-clients ships (shaded)
// and appends one line per data point to the file named by the broker
// config `courier.telemetry.out`:
//   <client instance id> <terminating> <metric name> <delta|cumulative|gauge> <value> [k=v ...]
// where the k=v are the resource's attributes, then the data point's.
package courier.test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

public class TelemetryReceiver implements MetricsReporter, ClientTelemetry {
    private String out;

    @Override
    public void configure(Map<String, ?> configs) {
        Object o = configs.get("courier.telemetry.out");
        out = o == null ? null : o.toString();
    }

    @Override
    public void init(List<KafkaMetric> metrics) {}

    @Override
    public void metricChange(KafkaMetric metric) {}

    @Override
    public void metricRemoval(KafkaMetric metric) {}

    @Override
    public void close() {}

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return (context, payload) -> {
            StringBuilder lines = new StringBuilder();
            try {
                MetricsData data = MetricsData.parseFrom(payload.data());
                for (ResourceMetrics rm : data.getResourceMetricsList()) {
                    StringBuilder resource = new StringBuilder();
                    for (KeyValue kv : rm.getResource().getAttributesList()) {
                        resource.append(' ').append(kv.getKey()).append('=')
                            .append(kv.getValue().getStringValue());
                    }
                    for (ScopeMetrics sm : rm.getScopeMetricsList()) {
                        for (Metric m : sm.getMetricsList()) {
                            boolean sum = m.hasSum();
                            List<NumberDataPoint> points = sum
                                ? m.getSum().getDataPointsList()
                                : m.getGauge().getDataPointsList();
                            for (NumberDataPoint p : points) {
                                String value = p.getValueCase() == NumberDataPoint.ValueCase.AS_INT
                                    ? Long.toString(p.getAsInt())
                                    : Double.toString(p.getAsDouble());
                                lines.append(payload.clientInstanceId()).append(' ')
                                    .append(payload.isTerminating()).append(' ')
                                    .append(m.getName()).append(' ')
                                    .append(!sum ? "gauge"
                                        : m.getSum().getAggregationTemporalityValue() == 1
                                            ? "delta" : "cumulative").append(' ')
                                    .append(value).append(resource);
                                for (KeyValue kv : p.getAttributesList()) {
                                    lines.append(' ').append(kv.getKey()).append('=')
                                        .append(kv.getValue().getStringValue());
                                }
                                lines.append('\n');
                            }
                        }
                    }
                }
            } catch (Exception e) {
                lines.append("undecodable ").append(e).append('\n');
            }
            try {
                Files.write(Paths.get(out), lines.toString().getBytes(StandardCharsets.UTF_8),
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        };
    }
}
