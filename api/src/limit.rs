//! The public answers' rate limit: a token bucket per (client IP, Agent), in
//! this process's memory.
//!
//! A bucket holds `per_minute` answers and refills continuously at that rate,
//! so a client may ask a short burst and then one answer every `60 /
//! per_minute` seconds. Memory is bounded: buckets that have refilled are
//! forgotten (they hold nothing a new bucket would not), and past
//! [`MAX_CLIENTS`] live buckets new clients are refused until some refill.
//! Each API replica counts on its own. An IPv6 client is counted by its /64.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use svc_core::ids::AgentId;

/// Live buckets at most (about 64 bytes each).
pub const MAX_CLIENTS: usize = 100_000;
/// Sweeps of refilled buckets happen at most this often.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

pub struct RateLimiter {
    per_minute: u32,
    state: Mutex<State>,
    max_clients: usize,
}

struct State {
    buckets: HashMap<(IpAddr, AgentId), Bucket>,
    swept: Option<Instant>,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    pub fn new(per_minute: u32) -> Self {
        Self::with_capacity(per_minute, MAX_CLIENTS)
    }

    fn with_capacity(per_minute: u32, max_clients: usize) -> Self {
        let state = State { buckets: HashMap::new(), swept: None };
        Self { per_minute: per_minute.max(1), state: Mutex::new(state), max_clients }
    }

    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Takes one answer from the client's bucket, or says how long until one
    /// is there.
    pub fn take(&self, client: IpAddr, agent: AgentId, now: Instant) -> Result<(), Duration> {
        let capacity = f64::from(self.per_minute);
        let per_second = capacity / 60.0;
        let refilled = |bucket: &Bucket| {
            (bucket.tokens + now.saturating_duration_since(bucket.at).as_secs_f64() * per_second).min(capacity)
        };
        let Ok(mut state) = self.state.lock() else {
            // A panic elsewhere poisoned the lock: refuse rather than count wrong.
            return Err(Duration::from_secs(60));
        };
        let client = client_key(client);
        if state.buckets.len() >= self.max_clients && state.swept.is_none_or(|at| now - at >= SWEEP_EVERY) {
            state.buckets.retain(|_, bucket| refilled(bucket) < capacity);
            state.swept = Some(now);
            if state.buckets.len() >= self.max_clients {
                // Once per sweep, not once per refusal.
                tracing::warn!(
                    clients = self.max_clients,
                    "public answers: too many clients at once; refusing new ones"
                );
            }
        }
        let full = state.buckets.len() >= self.max_clients;
        let bucket = match state.buckets.get_mut(&(client, agent)) {
            Some(bucket) => bucket,
            None if full => return Err(Duration::from_secs_f64(60.0 / capacity).max(Duration::from_secs(1))),
            None => state.buckets.entry((client, agent)).or_insert(Bucket { tokens: capacity, at: now }),
        };
        let tokens = refilled(bucket);
        if tokens >= 1.0 {
            *bucket = Bucket { tokens: tokens - 1.0, at: now };
            Ok(())
        } else {
            *bucket = Bucket { tokens, at: now };
            Err(Duration::from_secs_f64((1.0 - tokens) / per_second))
        }
    }

    #[cfg(test)]
    fn clients(&self) -> usize {
        self.state.lock().map(|s| s.buckets.len()).unwrap_or_default()
    }
}

/// The client a bucket counts: an IPv4 address, or an IPv6 /64 (one host
/// commonly holds a whole /64, and would otherwise have a bucket per address).
fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        },
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::net::Ipv4Addr;

    const ONE: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    const TWO: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));

    #[test]
    fn an_ipv6_64_is_one_client() {
        let limiter = RateLimiter::new(1);
        let (agent, now) = (AgentId::new(), Instant::now());
        let host = |last: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 7, 0, 0, 0, last));
        limiter.take(host(1), agent, now).unwrap();
        assert!(limiter.take(host(2), agent, now).is_err(), "another address of the same /64");
        limiter.take(IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 8, 0, 0, 0, 1)), agent, now).unwrap();
        // An IPv4 client seen through an IPv4-mapped address is that client.
        limiter.take(ONE, agent, now).unwrap();
        assert!(limiter.take(IpAddr::V6(Ipv4Addr::new(192, 0, 2, 1).to_ipv6_mapped()), agent, now).is_err());
    }

    #[test]
    fn a_burst_then_one_answer_per_interval() {
        let limiter = RateLimiter::new(3);
        let (agent, start) = (AgentId::new(), Instant::now());
        for _ in 0..3 {
            limiter.take(ONE, agent, start).unwrap();
        }
        let wait = limiter.take(ONE, agent, start).unwrap_err();
        assert_eq!(wait.as_secs(), 20, "one answer every 60 / 3 seconds");
        // Another client, another Agent: their own buckets.
        limiter.take(TWO, agent, start).unwrap();
        limiter.take(ONE, AgentId::new(), start).unwrap();
        // Refused calls do not dig deeper; the refill arrives on time.
        assert!(limiter.take(ONE, agent, start + Duration::from_secs(19)).is_err());
        limiter.take(ONE, agent, start + Duration::from_secs(21)).unwrap();
        assert!(limiter.take(ONE, agent, start + Duration::from_secs(22)).is_err());
    }

    #[test]
    fn memory_is_bounded_and_refilled_buckets_are_forgotten() {
        let limiter = RateLimiter::with_capacity(2, 3);
        let start = Instant::now();
        let agents: Vec<AgentId> = (0..4).map(|_| AgentId::new()).collect();
        for agent in &agents[..3] {
            limiter.take(ONE, *agent, start).unwrap();
        }
        // Full, and nobody has refilled yet: a new client waits.
        assert!(limiter.take(ONE, agents[3], start).is_err());
        assert_eq!(limiter.clients(), 3);
        // A minute on, every bucket is full again and forgotten.
        limiter.take(ONE, agents[3], start + Duration::from_secs(60)).unwrap();
        assert_eq!(limiter.clients(), 1);
    }
}
