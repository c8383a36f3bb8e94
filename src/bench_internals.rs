//! Hooks for the criterion micro-benchmarks (`benches/hot_path.rs`): the
//! crate-internal report routing, driven with no broker. Compiled only with
//! the `bench-internals` feature, which the crate's own dev-dependency on
//! itself turns on; not part of the API.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use futures::StreamExt;

use crate::clock::Mono;
use crate::delivery::owed::{Owed, ReplyTo};
use crate::delivery::router::route;
use crate::delivery::settlement::Outcome;
use crate::delivery::subscription::{ReportStream, SubscriptionShared};
use crate::record::{Record, Topic};
use crate::report::ReportMode;
use crate::stats::Stats;

/// One batch's owed reports, ready to route: `records` records spread
/// round-robin in runs of `run` over `subscribers` subscriptions.
pub struct PreparedBatch {
    owed: Owed,
    records: usize,
    streams: Vec<ReportStream>,
    stats: Stats,
}

impl PreparedBatch {
    /// Builds the batch (records, owed entries, subscriptions).
    pub fn new(records: usize, subscribers: usize, run: usize) -> PreparedBatch {
        let closed = Arc::new(AtomicBool::new(false));
        let subs: Vec<_> = (0..subscribers)
            .map(|_| SubscriptionShared::new(ReportMode::All, usize::MAX >> 4, closed.clone()))
            .collect();
        let streams = subs.iter().map(|s| ReportStream::new(s.clone())).collect();
        let topic = Topic::from("bench");
        let value = bytes::Bytes::from_static(&[b'x'; 100]);
        let now = Mono::now();
        let mut owed = Owed::default();
        for i in 0..records {
            let record = Record::to(topic).value(value.clone());
            let s = &subs[(i / run.max(1)) % subscribers];
            owed.push(i as u32, 0, now, record, ReplyTo::Subscription(s));
        }
        // A producer's stats, publishing with the `metrics` feature; the
        // topic's handles resolved here (its batch was sealed), as a
        // producer resolves them once, not in the timed routing.
        let stats = Stats::new("bench");
        stats.metrics.produced(topic, records as u64);
        PreparedBatch {
            owed,
            records,
            streams,
            stats,
        }
    }

    /// Routes the batch as delivered and reads every report from the
    /// subscriptions' streams, one `poll_next` a report (as a `Stream`
    /// user does) or one `next_batch` at a time; returns the reports read.
    pub fn route_and_read(mut self, batched: bool) -> usize {
        route(
            Topic::from("bench"),
            0,
            self.records as i32,
            1,
            std::mem::take(&mut self.owed),
            Outcome::Delivered {
                base_offset: Some(0),
                log_append_time: None,
            },
            &self.stats,
        );
        let mut read = 0;
        for s in &mut self.streams {
            futures::executor::block_on(async {
                if batched {
                    while let Some(Some(b)) = futures::FutureExt::now_or_never(s.next_batch()) {
                        read += b.filter(|r| r.is_delivered()).count();
                    }
                } else {
                    while let Some(Some(r)) = futures::FutureExt::now_or_never(s.next()) {
                        read += r.is_delivered() as usize;
                    }
                }
            });
        }
        read
    }
}
