//! A group-commit helper: callers submit items and await their own result, while a
//! few workers take everything waiting as one batch. Under load a batch forms
//! while the previous one commits; an item alone goes alone, without delay.

use std::{future::Future, sync::Arc};

use tokio::sync::{mpsc, oneshot, Mutex};

type Queue<T, R> = Arc<Mutex<mpsc::UnboundedReceiver<(T, oneshot::Sender<R>)>>>;

pub struct Batcher<T, R> {
    tx: mpsc::UnboundedSender<(T, oneshot::Sender<R>)>,
}

impl<T, R> Clone for Batcher<T, R> {
    fn clone(&self) -> Self {
        Batcher { tx: self.tx.clone() }
    }
}

impl<T: Send + 'static, R: Send + 'static> Batcher<T, R> {
    /// Starts `workers` tasks on the current runtime; `run` gets up to `max` items
    /// and returns one result per item, in order.
    pub fn start<F, Fut>(workers: usize, max: usize, run: F) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<R>> + Send,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let rx: Queue<T, R> = Arc::new(Mutex::new(rx));
        let run = Arc::new(run);
        for _ in 0..workers {
            let (rx, run) = (rx.clone(), run.clone());
            tokio::spawn(async move {
                loop {
                    let batch = {
                        let mut rx = rx.lock().await;
                        let Some(first) = rx.recv().await else { return };
                        let mut batch = vec![first];
                        while batch.len() < max {
                            match rx.try_recv() {
                                Ok(item) => batch.push(item),
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
        Batcher { tx }
    }

    /// The item's result; `None` if the workers are gone.
    pub async fn submit(&self, item: T) -> Option<R> {
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
        let b: Batcher<u32, u32> = Batcher::start(1, 64, move |items: Vec<u32>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(items.len());
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                items.into_iter().map(|i| i * 2).collect()
            }
        });
        let results = futures_util::future::join_all((0..50).map(|i| b.submit(i))).await;
        assert_eq!(results, (0..50).map(|i| Some(i * 2)).collect::<Vec<_>>());
        let sizes = sizes.lock().unwrap();
        assert!(sizes.len() < 50, "batched: {sizes:?}");
        assert_eq!(sizes.iter().sum::<usize>(), 50);
    }
}
