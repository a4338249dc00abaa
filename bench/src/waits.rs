//! What a benchmark's PostgreSQL sessions were doing, sampled from
//! `pg_stat_activity` every few milliseconds: on the CPU, waiting on a named
//! event (a lock, a WAL flush, a buffer read), or idle waiting for the process
//! that opened them. Where a rate falls while the CPU per operation does not,
//! this says what the operations waited on instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the sessions are looked at.
const EVERY: Duration = Duration::from_millis(25);

/// Samples the sessions one process opened (by `application_name`) in the
/// background until dropped; [`Sampler::take`] returns what was seen since
/// the last take.
pub struct Sampler {
    seen: Arc<Mutex<Samples>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    pub fn start(pool: sqlx::PgPool, database: String, application: &'static str) -> Self {
        let seen: Arc<Mutex<Samples>> = Arc::default();
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                let mut tick = tokio::time::interval(EVERY);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    tick.tick().await;
                    let Ok(rows) = sqlx::query_as::<_, (Option<String>, Option<String>, Option<String>)>(
                        "SELECT state, wait_event_type, wait_event FROM pg_stat_activity \
                         WHERE datname = $1 AND application_name = $2",
                    )
                    .bind(&database)
                    .bind(application)
                    .fetch_all(&pool)
                    .await
                    else {
                        continue;
                    };
                    let mut seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    seen.looks += 1;
                    for (state, kind, event) in rows {
                        *seen.classes.entry(class(state.as_deref(), kind.as_deref(), event.as_deref())).or_default() +=
                            1;
                    }
                }
            }
        });
        Self { seen, task }
    }

    /// The samples since the last take.
    pub fn take(&self) -> Samples {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What one sampled session was doing, in a few words.
fn class(state: Option<&str>, kind: Option<&str>, event: Option<&str>) -> String {
    match (state, kind, event) {
        // An idle session's last wait is its client read: its process has it
        // (an aborted transaction's too, waiting for its rollback).
        (Some("idle"), ..) => "idle".into(),
        (Some(state), ..) if state.starts_with("idle in transaction") => "idle in transaction".into(),
        (Some("active"), None, _) => "CPU".into(),
        (Some("active"), Some(kind), Some(event)) => format!("{kind}:{event}"),
        // Another state (a fast-path call, statistics `disabled`): by name.
        (state, ..) => state.unwrap_or("unknown").into(),
    }
}

/// Counts of what the sessions were doing, by class, over a number of looks.
#[derive(Default)]
pub struct Samples {
    looks: u64,
    classes: HashMap<String, u64>,
}

impl Samples {
    /// Sessions busy (not idle) on average at a look: how much of PostgreSQL
    /// the process kept working.
    pub fn busy_sessions(&self) -> f64 {
        self.busy().map(|(_, count)| count).sum::<u64>() as f64 / self.looks.max(1) as f64
    }

    /// Each busy class (all but idle) and its count.
    fn busy(&self) -> impl Iterator<Item = (&str, u64)> {
        self.classes.iter().filter(|(class, _)| *class != "idle").map(|(class, count)| (class.as_str(), *count))
    }

    /// The busy classes (all but idle), largest first, each as its share of
    /// the busy samples, the first `n` of them: "CPU 61%, LWLock:WALWrite 20%".
    pub fn busiest(&self, n: usize) -> String {
        let mut busy: Vec<(&str, u64)> = self.busy().collect();
        let total: u64 = busy.iter().map(|(_, count)| count).sum();
        if total == 0 {
            return "no busy sample".into();
        }
        busy.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let shares: Vec<String> = busy
            .iter()
            .take(n)
            .map(|(class, count)| format!("{class} {:.0}%", 100.0 * *count as f64 / total as f64))
            .collect();
        shares.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_classed_by_state_then_wait() {
        assert_eq!(class(Some("idle"), Some("Client"), Some("ClientRead")), "idle");
        assert_eq!(class(Some("active"), None, None), "CPU");
        assert_eq!(class(Some("active"), Some("LWLock"), Some("WALWrite")), "LWLock:WALWrite");
        assert_eq!(class(Some("idle in transaction"), Some("Client"), Some("ClientRead")), "idle in transaction");
        let aborted = class(Some("idle in transaction (aborted)"), Some("Client"), Some("ClientRead"));
        assert_eq!(aborted, "idle in transaction");
        assert_eq!(class(Some("disabled"), Some("Client"), Some("ClientRead")), "disabled");
        assert_eq!(class(None, None, None), "unknown");
    }

    #[test]
    fn the_busiest_leave_idle_out_and_add_up() {
        let samples = Samples {
            looks: 250,
            classes: HashMap::from([
                ("idle".to_owned(), 900),
                ("CPU".to_owned(), 60),
                ("IO:WALSync".to_owned(), 30),
                ("Lock:tuple".to_owned(), 10),
            ]),
        };
        assert_eq!(samples.busy_sessions(), 0.4);
        assert_eq!(samples.busiest(2), "CPU 60%, IO:WALSync 30%");
        assert_eq!(samples.busiest(5), "CPU 60%, IO:WALSync 30%, Lock:tuple 10%");
        assert_eq!(Samples::default().busiest(3), "no busy sample");
        assert_eq!(Samples::default().busy_sessions(), 0.0);
    }
}
