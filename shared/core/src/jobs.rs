//! Background jobs: what the API asks the workers to do, by id only. PostgreSQL
//! holds the work itself; a job is a nudge, so a lost one is re-sent by the
//! sweeper and a repeated one finds its work done.

use std::time::Duration;

use apalis_core::backend::TaskSink;
use apalis_redis::{Config, ConnectionManager, RedisStorage};
use redis::AsyncCommands;
use redis::aio::ConnectionManagerConfig;
use serde::{Deserialize, Serialize};

use crate::ids::{RevisionId, RunId};

/// One unit of background work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    /// Verify, split, index and promote (or fail) a revision.
    ProcessRevision { revision: RevisionId },
    /// Apply the next entries of a reconcile run.
    ApplyReconcile { run: RunId },
}

impl Job {
    /// Whether the job only wakes a worker to process revisions: any such
    /// job serves whichever revision is next in turn.
    pub fn is_wake_up(&self) -> bool {
        matches!(self, Job::ProcessRevision { .. })
    }
}

/// Jobs waiting in the queue at or beyond which a producer sends no more
/// wake-ups ([`Queue::send`]): enough to start every job slot of a few
/// dozen workers at once; a slot that finds work keeps processing and wakes
/// another when it hands its slot back.
pub const WAKE_UPS_WAITING: u64 = 64;

/// Every job kind goes through one queue; its Redis keys all start with the
/// queue name, `{namespace}_jobs` (no `:`, which apalis-redis splits on).
pub fn queue_name(namespace: &str) -> String {
    format!("{namespace}_jobs")
}

/// The apalis-redis configuration producers and workers share: the queue name,
/// and how workers watch each other (a worker silent for 2 heartbeats of 5 s is
/// dead, and another re-runs its jobs).
pub fn apalis_config(namespace: &str) -> Config {
    Config::default()
        .queue(queue_name(namespace))
        .heartbeat_interval(Duration::from_secs(5))
        .missed_heartbeats(2)
        // Push events nobody subscribes to would be published on every push.
        .emit_events(false)
}

/// Longest a push waits (Redis down, or reconnecting) before it gives up: the
/// work is in PostgreSQL, and the sweeper sends the job again.
const PUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest a vacuum of finished jobs may take (it scans their records).
const VACUUM_TIMEOUT: Duration = Duration::from_secs(30);

/// For each id of a finished set (KEYS[1]) whose job finished at or before
/// ARGV[1] (`done_at`, seconds): its payload (in KEYS[2]), metadata (KEYS[3]
/// `:id`), result (KEYS[3] `:result`) and set membership go. An id without
/// metadata is only taken out of the set.
static FORGET_FINISHED: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        "local n = 0
         local cutoff = tonumber(ARGV[1])
         for i = 2, #ARGV do
           local id = ARGV[i]
           local meta = KEYS[3] .. ':' .. id
           local done_at = redis.call('hget', meta, 'done_at')
           if (not done_at) or tonumber(done_at) <= cutoff then
             redis.call('hdel', KEYS[2], id)
             redis.call('hdel', KEYS[3] .. ':result', id)
             redis.call('del', meta)
             redis.call('srem', KEYS[1], id)
             if done_at then n = n + 1 end
           end
         end
         return n",
    )
});

/// Wake-ups among the first ARGV[3] jobs of the active list (KEYS[1]) and
/// the first ARGV[3] of the scheduled set (KEYS[2]) due at ARGV[1], by their
/// payloads (in KEYS[3]); it stops counting at ARGV[2].
static COUNT_WAKE_UPS: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        "local n = 0
         local enough = tonumber(ARGV[2])
         local function count(ids)
           for _, id in ipairs(ids) do
             if n >= enough then return end
             local payload = redis.call('hget', KEYS[3], id)
             if payload and string.find(payload, '\"kind\":\"process_revision\"', 1, true) then
               n = n + 1
             end
           end
         end
         local scan = tonumber(ARGV[3])
         count(redis.call('lrange', KEYS[1], 0, scan - 1))
         count(redis.call('zrangebyscore', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, scan))
         return n",
    )
});

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("Redis did not answer within {0:?}")]
    Timeout(Duration),
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    #[error("push: {0}")]
    Push(String),
    #[error("Redis failed a push a moment ago: not trying until it answers again")]
    BreakerOpen,
}

/// Pushes jobs onto the queue the workers read. It connects on first use, so a
/// process starts while Redis is down, and reconnects by itself after.
pub struct Queue {
    client: redis::Client,
    namespace: String,
    /// Open after a failed push: pushes fail at once until Redis answers.
    breaker: std::sync::Arc<crate::breaker::Breaker>,
    /// The storage pushes go through, and its connection for plain reads.
    storage: tokio::sync::OnceCell<(RedisStorage<Job>, ConnectionManager)>,
}

/// Jobs waiting in Redis and jobs claimed by workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Depth {
    pub waiting: u64,
    pub running: u64,
}

/// A Redis client for `url` whose connections find a peer that went away
/// without a word (a partition, a lost host) within seconds rather than
/// hours: TCP keepalive probes after 5 s of silence, every 2 s, 3 of them;
/// and data unacknowledged for 10 s ends the connection (`TCP_USER_TIMEOUT`).
pub fn redis_client(url: &str) -> Result<redis::Client, redis::RedisError> {
    use redis::IntoConnectionInfo;
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(5))
        .with_interval(Duration::from_secs(2))
        .with_retries(3);
    let tcp = redis::io::tcp::TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive)
        .set_user_timeout(Duration::from_secs(10));
    redis::Client::open(url.into_connection_info()?.set_tcp_settings(tcp))
}

impl Queue {
    /// A queue on the Redis at `url` (database index honoured) under `namespace`.
    pub fn new(url: &str, namespace: &str) -> Result<Self, QueueError> {
        Ok(Self {
            client: redis_client(url)?,
            namespace: namespace.to_owned(),
            breaker: Default::default(),
            storage: Default::default(),
        })
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Whether pushes fail at once for now ([`crate::breaker`]).
    pub fn breaker_open(&self) -> bool {
        self.breaker.is_open()
    }

    /// `work` against Redis for a push, within [`PUSH_TIMEOUT`], unless the
    /// breaker is open; a failure opens it.
    async fn guarded<T>(&self, work: impl Future<Output = Result<T, QueueError>>) -> Result<T, QueueError> {
        if self.breaker.is_open() {
            return Err(QueueError::BreakerOpen);
        }
        let result = match tokio::time::timeout(PUSH_TIMEOUT, work).await {
            Ok(result) => result,
            Err(_) => Err(QueueError::Timeout(PUSH_TIMEOUT)),
        };
        if result.is_err() {
            self.breaker.trip(&self.client);
        }
        result
    }

    /// A connection that reconnects by itself, with timeouts longer than the
    /// library's 500 ms (a slow answer under load would otherwise kill a worker).
    pub async fn connection(&self) -> Result<ConnectionManager, QueueError> {
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_secs(5)))
            .set_connection_timeout(Some(Duration::from_secs(2)));
        Ok(ConnectionManager::new_with_config(self.client.clone(), config).await?)
    }

    async fn storage(&self) -> Result<&(RedisStorage<Job>, ConnectionManager), QueueError> {
        self.storage
            .get_or_try_init(|| async {
                let connection = self.connection().await?;
                let storage = RedisStorage::new(connection.clone()).with_config(apalis_config(&self.namespace));
                Ok::<_, QueueError>((storage, connection))
            })
            .await
    }

    /// Sends what committed work needs: every job, except the wake-ups
    /// (`ProcessRevision`) the queue does not need, because
    /// [`WAKE_UPS_WAITING`] wake-ups or more wait that no worker has taken
    /// yet. Each of those starts after this call, so after the commit of the
    /// work it stands for, and a wake-up processes revisions until none is
    /// left (`svc-worker`'s jobs); a job per revision would grow the queue
    /// with every backlog, and every job taken costs Redis a pass over the
    /// queue. Within a bounded time.
    pub async fn send(&self, jobs: &[Job]) -> Result<(), QueueError> {
        let send = async {
            let wake_ups = jobs.iter().filter(|job| job.is_wake_up()).count();
            if wake_ups == 0 {
                return self.push_all(jobs).await;
            }
            let waiting = self.wake_ups_waiting().await?;
            let room = usize::try_from(WAKE_UPS_WAITING.saturating_sub(waiting)).unwrap_or(usize::MAX);
            if room >= wake_ups {
                return self.push_all(jobs).await;
            }
            let mut left_out = wake_ups - room;
            let needed: Vec<Job> = jobs
                .iter()
                .filter(|job| {
                    let leave = job.is_wake_up() && left_out > 0;
                    left_out -= usize::from(leave);
                    !leave
                })
                .copied()
                .collect();
            if needed.is_empty() { Ok(()) } else { self.push_all(&needed).await }
        };
        self.guarded(send).await
    }

    /// Wake-ups waiting that no worker has taken yet, up to
    /// [`WAKE_UPS_WAITING`]: apalis-redis pushes every job into its scheduled
    /// set, due now, and a worker's fetch moves what is due to the active
    /// list; other jobs (reconcile applies) waiting there are not counted.
    /// One script, reading at most four times that many jobs of each, so
    /// wake-ups behind that many other jobs are not seen: a producer then
    /// sends up to [`WAKE_UPS_WAITING`] more than needed (within a bounded
    /// time).
    pub async fn wake_ups_waiting(&self) -> Result<u64, QueueError> {
        let read = async {
            let mut conn = self.storage().await?.1.clone();
            let config = apalis_config(&self.namespace);
            let now = time::OffsetDateTime::now_utc().unix_timestamp();
            Ok::<_, QueueError>(
                COUNT_WAKE_UPS
                    .key(config.active_jobs_list())
                    .key(config.scheduled_jobs_set())
                    .key(config.job_data_hash())
                    .arg(now)
                    .arg(WAKE_UPS_WAITING)
                    .arg(WAKE_UPS_WAITING * 4)
                    .invoke_async::<u64>(&mut conn)
                    .await?,
            )
        };
        self.guarded(read).await
    }

    /// Pushes `jobs` (within a bounded time, unless the breaker is open).
    pub async fn push_all(&self, jobs: &[Job]) -> Result<(), QueueError> {
        let push = async {
            let mut storage = self.storage().await?.0.clone();
            storage.push_bulk(jobs.to_vec()).await.map_err(|e| QueueError::Push(e.to_string()))
        };
        self.guarded(push).await
    }

    /// Drops what Redis keeps of jobs that finished more than `age` ago: their
    /// payload, their metadata, and their place in the done (or dead) set.
    /// apalis-redis keeps all of it forever otherwise. Only ids in those two
    /// sets are looked at (never a pending, scheduled or running job), 500 at
    /// a time, so no single Redis call grows with the number of jobs (the
    /// library's own vacuum reads every job's payload in one script).
    /// Returns the jobs dropped.
    pub async fn vacuum(&self, age: Duration) -> Result<u64, QueueError> {
        let work = async {
            let config = apalis_config(&self.namespace);
            let mut conn = self.client.get_multiplexed_async_connection().await?;
            // apalis-redis stamps `done_at` in seconds of the acknowledging
            // worker's clock.
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            let cutoff = now.saturating_sub(age).as_secs();
            let mut dropped = 0;
            for set in [config.done_jobs_set(), config.dead_jobs_set()] {
                let mut cursor = 0u64;
                loop {
                    let (next, ids): (u64, Vec<String>) =
                        redis::cmd("SSCAN").arg(&set).arg(cursor).arg("COUNT").arg(500).query_async(&mut conn).await?;
                    if !ids.is_empty() {
                        dropped += FORGET_FINISHED
                            .key(&set)
                            .key(config.job_data_hash())
                            .key(config.job_meta_hash())
                            .arg(cutoff)
                            .arg(ids)
                            .invoke_async::<u64>(&mut conn)
                            .await?;
                    }
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
            }
            Ok::<_, QueueError>(dropped)
        };
        tokio::time::timeout(VACUUM_TIMEOUT, work).await.map_err(|_| QueueError::Timeout(VACUUM_TIMEOUT))?
    }

    /// How many jobs wait and run now (read with plain commands: the library's
    /// own statistics calls fail on this version).
    pub async fn depth(&self) -> Result<Depth, QueueError> {
        let read = async {
            let mut conn = self.client.get_multiplexed_async_connection().await?;
            let queue = queue_name(&self.namespace);
            let now = time::OffsetDateTime::now_utc().unix_timestamp();
            let active: u64 = conn.llen(format!("{queue}:active")).await?;
            let due: u64 = conn.zcount(format!("{queue}:scheduled"), "-inf", now).await?;
            let workers: Vec<String> = conn.zrange(format!("{queue}:workers"), 0, -1).await?;
            let mut running = 0;
            for worker in workers {
                running += conn.scard::<_, u64>(format!("{queue}:inflight:{worker}")).await?;
            }
            Ok::<_, QueueError>(Depth { waiting: active + due, running })
        };
        tokio::time::timeout(PUSH_TIMEOUT, read).await.map_err(|_| QueueError::Timeout(PUSH_TIMEOUT))?
    }
}
