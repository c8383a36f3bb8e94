mod support;

use courier::{Producer, Record};
use support::Tansu;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("courier=debug")
        .with_test_writer()
        .try_init();
    let broker = Tansu::start();
    create_topic(&broker.bootstrap(), "smoke", 3).await;
    let producer = Producer::builder()
        .bootstrap(&broker.bootstrap())
        .set("max.block.ms", "3000")
        .build()
        .unwrap();
    for i in 0..10 {
        let d = producer
            .send(Record::to("smoke").key(format!("k{i}")).value("v"))
            .await
            .expect("delivered");
        println!("{:?} {:?}", d.partition, d.offset);
    }
    producer.close().await;
}

async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    use courier::connection::{Connection, ConnectionOptions};
    use courier::protocol::messages::create_topics_request::CreatableTopic;
    use courier::protocol::messages::{CreateTopicsRequest, TopicName};
    let mut conn = Connection::connect(bootstrap, &ConnectionOptions::default())
        .await
        .unwrap();
    let t = CreatableTopic::default()
        .with_name(TopicName(kafka_protocol::protocol::StrBytes::from_string(
            topic.into(),
        )))
        .with_num_partitions(partitions)
        .with_replication_factor(1);
    let resp = conn
        .request(
            &CreateTopicsRequest::default()
                .with_topics(vec![t])
                .with_timeout_ms(5000),
        )
        .await
        .unwrap();
    assert_eq!(resp.topics[0].error_code, 0);
}
