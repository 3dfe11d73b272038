//! Group commit of the API's message creation: concurrent requests' messages and
//! deliveries go into one statement, and each request is answered after its commit.

use hookgate_shared::{
    batch::Batcher,
    db,
    store::publish_batch::{publish_batch, PublishRow, Published},
    AppState,
};

/// Why a batched publish failed; `unavailable` answers 503.
#[derive(Debug, Clone)]
pub struct PublishError {
    pub unavailable: bool,
    pub detail: String,
}

pub type Outcome = Result<Published, PublishError>;

#[derive(Clone)]
pub struct Publisher {
    batcher: Batcher<PublishRow, Outcome>,
}

const WORKERS: usize = 16;
const MAX_BATCH: usize = 256;

async fn run(state: &AppState, rows: &[PublishRow]) -> Result<Vec<Published>, hookgate_shared::store::StoreError> {
    let conn = db::conn(&state.db).await?;
    publish_batch(&**conn, rows).await
}

impl Publisher {
    pub fn start(state: AppState) -> Self {
        let batcher = Batcher::start(WORKERS, MAX_BATCH, move |rows: Vec<PublishRow>| {
            let state = state.clone();
            async move {
                let results = match run(&state, &rows).await {
                    Ok(r) => r.into_iter().map(Ok).collect(),
                    // One bad row must not fail its neighbours: publish them one by one.
                    Err(e) if !e.is_unavailable() && rows.len() > 1 => {
                        let mut out = Vec::with_capacity(rows.len());
                        for row in &rows {
                            out.push(match run(&state, std::slice::from_ref(row)).await {
                                Ok(mut r) => Ok(r.remove(0)),
                                Err(e) => Err(PublishError { unavailable: e.is_unavailable(), detail: e.to_string() }),
                            });
                        }
                        out
                    }
                    Err(e) => {
                        let err = PublishError { unavailable: e.is_unavailable(), detail: e.to_string() };
                        vec![Err(err); rows.len()]
                    }
                };
                if results.iter().any(|r| matches!(r, Ok(Published::Created { deliveries, .. }) if *deliveries > 0)) {
                    state.wake.poke();
                }
                results
            }
        });
        Publisher { batcher }
    }

    pub async fn publish(&self, row: PublishRow) -> Outcome {
        self.batcher
            .submit(row)
            .await
            .unwrap_or_else(|| Err(PublishError { unavailable: true, detail: "publishers stopped".into() }))
    }
}
