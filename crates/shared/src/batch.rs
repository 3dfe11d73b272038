//! A group-commit helper: callers submit items and await their own result, while a
//! few workers take everything waiting as one batch. Under load a batch forms
//! while the previous one commits. When items arrive closer together than the
//! gathering window, the first waits up to that window for company, so a steady
//! few hundred a second share statements too; an item alone (nothing came within
//! the window before it) goes at once.

use std::{
    future::Future,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use tokio::sync::{mpsc, oneshot, Mutex};

type Queue<T, R> = Arc<Mutex<mpsc::UnboundedReceiver<(T, oneshot::Sender<R>)>>>;

pub struct Batcher<T, R> {
    tx: mpsc::UnboundedSender<(T, oneshot::Sender<R>)>,
    clock: Arc<Clock>,
}

impl<T, R> Clone for Batcher<T, R> {
    fn clone(&self) -> Self {
        Batcher { tx: self.tx.clone(), clock: self.clock.clone() }
    }
}

/// When the last two items were submitted, in microseconds since the batcher
/// started: whether items come closer together than the gathering window.
struct Clock {
    origin: Instant,
    last: AtomicU64,
    gap: AtomicU64,
}

impl Clock {
    fn tick(&self) {
        let now = self.origin.elapsed().as_micros() as u64;
        let before = self.last.swap(now, Ordering::Relaxed);
        let gap = if before == u64::MAX { u64::MAX } else { now.saturating_sub(before) };
        self.gap.store(gap, Ordering::Relaxed);
    }

    /// Whether the last item came within `window` of the one before it.
    fn busy(&self, window: Duration) -> bool {
        self.gap.load(Ordering::Relaxed) < window.as_micros() as u64
    }
}

impl<T: Send + 'static, R: Send + 'static> Batcher<T, R> {
    /// Starts `workers` tasks on the current runtime; `run` gets up to `max` items
    /// and returns one result per item, in order. A batch waits up to `gather`
    /// for more items while they come closer together than that.
    pub fn start<F, Fut>(workers: usize, max: usize, gather: Duration, run: F) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<R>> + Send,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let rx: Queue<T, R> = Arc::new(Mutex::new(rx));
        let run = Arc::new(run);
        let clock =
            Arc::new(Clock { origin: Instant::now(), last: AtomicU64::new(u64::MAX), gap: AtomicU64::new(u64::MAX) });
        for _ in 0..workers {
            let (rx, run, clock) = (rx.clone(), run.clone(), clock.clone());
            tokio::spawn(async move {
                loop {
                    let batch = {
                        let mut rx = rx.lock().await;
                        let Some(first) = rx.recv().await else { return };
                        let until = tokio::time::Instant::now() + gather;
                        let mut batch = vec![first];
                        while batch.len() < max {
                            match rx.try_recv() {
                                Ok(item) => batch.push(item),
                                Err(_) if clock.busy(gather) => match tokio::time::timeout_at(until, rx.recv()).await {
                                    Ok(Some(item)) => batch.push(item),
                                    _ => break,
                                },
                                Err(_) => break,
                            }
                        }
                        batch
                    };
                    let (items, replies): (Vec<T>, Vec<_>) = batch.into_iter().unzip();
                    for (reply, result) in replies.into_iter().zip(run(items).await) {
                        let _ = reply.send(result);
                    }
                }
            });
        }
        Batcher { tx, clock }
    }

    /// The item's result; `None` if the workers are gone.
    pub async fn submit(&self, item: T) -> Option<R> {
        self.clock.tick();
        let (reply, answer) = oneshot::channel();
        self.tx.send((item, reply)).ok()?;
        answer.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_caller_gets_its_own_result_and_concurrent_items_share_batches() {
        let sizes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = sizes.clone();
        let b: Batcher<u32, u32> = Batcher::start(1, 64, Duration::ZERO, move |items: Vec<u32>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(items.len());
                tokio::time::sleep(Duration::from_millis(20)).await;
                items.into_iter().map(|i| i * 2).collect()
            }
        });
        let results = futures_util::future::join_all((0..50).map(|i| b.submit(i))).await;
        assert_eq!(results, (0..50).map(|i| Some(i * 2)).collect::<Vec<_>>());
        let sizes = sizes.lock().unwrap();
        assert!(sizes.len() < 50, "batched: {sizes:?}");
        assert_eq!(sizes.iter().sum::<usize>(), 50);
    }

    #[tokio::test]
    async fn items_that_come_close_together_wait_for_company_and_one_alone_goes_at_once() {
        let sizes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = sizes.clone();
        let b: Batcher<u32, u32> = Batcher::start(1, 64, Duration::from_millis(20), move |items: Vec<u32>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(items.len());
                items
            }
        });
        // Alone: answered without waiting out the window.
        let alone = Instant::now();
        assert_eq!(b.submit(1).await, Some(1));
        assert!(alone.elapsed() < Duration::from_millis(15), "{:?}", alone.elapsed());
        // Ten, a millisecond apart: they share batches.
        let mut waiting = Vec::new();
        for i in 0..10 {
            let b = b.clone();
            waiting.push(tokio::spawn(async move { b.submit(i).await }));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        for w in waiting {
            w.await.unwrap();
        }
        let sizes = sizes.lock().unwrap();
        assert!(sizes.len() <= 4, "ten close together in a few batches, not one each: {sizes:?}");
    }
}
