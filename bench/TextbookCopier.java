import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * bench.textbook_copier in Java: Kafka's exactly-once consume-transform-produce with Kafka's own
 * clients, which speak transactions v2 (KIP-890 part 2) to brokers that finalized
 * transaction.version 2, as Kafka 4's do: no AddPartitionsToTxn or AddOffsetsToTxn round trips
 * of the client's, the partitions' leaders add them. librdkafka (confluent-kafka) speaks v1 only.
 *
 * <pre>java -cp '&lt;Kafka jars&gt;/*' bench/TextbookCopier.java SOURCE_SERVERS TARGET_SERVERS TOPIC REMOTE PARTITIONS</pre>
 *
 * Run by the JDK's source launcher (no build step), by bench.replicators.textbook_java. Same shape
 * as the Python one: a read_committed consumer of every partition of TOPIC from offset 0; two
 * transactional producers taking turns, each record to the same partition of REMOTE (created with
 * PARTITIONS if missing), key, value, headers and CreateTime kept, the consumer's positions in the
 * same transaction; a commit as soon as the consumer holds nothing more. Copies until SIGTERM (the
 * transaction in progress is committed), then prints how many transactions it committed; fails
 * on the first error. Plaintext clusters only, as the benchmarks' MirrorMaker 2.
 */
public class TextbookCopier {
    static final Duration IDLE_WAIT = Duration.ofMillis(50);

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: TextbookCopier SOURCE_SERVERS TARGET_SERVERS TOPIC REMOTE PARTITIONS");
            System.exit(2);
        }
        String source = args[0], target = args[1], topic = args[2], remote = args[3];
        int partitions = Integer.parseInt(args[4]);
        createTopic(target, remote, partitions);
        KafkaConsumer<byte[], byte[]> consumer = consumer(source);
        List<TopicPartition> assigned = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            assigned.add(new TopicPartition(topic, p));
        }
        consumer.assign(assigned);
        consumer.seekToBeginning(assigned);
        List<KafkaProducer<byte[], byte[]>> producers = List.of(producer(target, remote + "-0"), producer(target, remote + "-1"));
        ConsumerGroupMetadata group = consumer.groupMetadata();

        Thread copying = Thread.currentThread();
        AtomicLong committed = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            try {
                copying.join(30_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            System.out.println(committed.get() + " transaction(s) committed");
            System.out.flush();
        }));

        int turn = 0;
        while (!stop.get()) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ZERO);
            if (records.isEmpty()) {
                records = consumer.poll(IDLE_WAIT);
                if (records.isEmpty()) {
                    continue;
                }
            }
            KafkaProducer<byte[], byte[]> producer = producers.get(turn);
            producer.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> positions = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> record : records) {
                producer.send(new ProducerRecord<>(remote, record.partition(), record.timestamp(), record.key(), record.value(), record.headers()));
                // Under the remote topic's name, as the Python copier commits them: Kafka 4's group
                // coordinator refuses offsets of a topic its cluster does not have.
                positions.put(new TopicPartition(remote, record.partition()), new OffsetAndMetadata(record.offset() + 1));
            }
            producer.sendOffsetsToTransaction(positions, group);
            producer.commitTransaction();
            committed.incrementAndGet();
            turn = 1 - turn;
        }
        consumer.close();
        for (KafkaProducer<byte[], byte[]> producer : producers) {
            producer.close();
        }
    }

    static void createTopic(String servers, String name, int partitions) throws Exception {
        Properties settings = new Properties();
        settings.put("bootstrap.servers", servers);
        try (Admin admin = Admin.create(settings)) {
            admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get();
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) {
                throw e;
            }
        }
    }

    static KafkaConsumer<byte[], byte[]> consumer(String servers) {
        Properties settings = new Properties();
        settings.put("bootstrap.servers", servers);
        settings.put("group.id", "textbook-java-" + UUID.randomUUID().toString().substring(0, 8));
        settings.put("enable.auto.commit", "false");
        settings.put("isolation.level", "read_committed");
        settings.put("fetch.max.wait.ms", "100"); // as the Python copier's fetch.wait.max.ms
        settings.put("max.poll.records", "10000"); // as its CONSUME_BATCH
        return new KafkaConsumer<>(settings, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static KafkaProducer<byte[], byte[]> producer(String servers, String transactionalId) {
        Properties settings = new Properties();
        settings.put("bootstrap.servers", servers);
        settings.put("transactional.id", transactionalId);
        settings.put("linger.ms", "5"); // as the Python copier's
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(settings, new ByteArraySerializer(), new ByteArraySerializer());
        producer.initTransactions();
        return producer;
    }
}
