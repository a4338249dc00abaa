//! What a benchmark's work cost in CPU time, read from Linux's `/proc`: the
//! service's processes and their PostgreSQL sessions (told apart by the
//! `application_name` each process gives its connections). A rate moves with
//! everything else the machine does; the CPU time per operation much less.

use std::collections::HashMap;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// CPU seconds (user and system) a process has used; `None` once it is gone.
fn seconds(pid: u32) -> Option<f64> {
    parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The CPU seconds of a `/proc/<pid>/stat` line.
fn parse(stat: &str) -> Option<f64> {
    // The name (field 2) may hold spaces and parentheses: count the fields
    // after its last closing parenthesis (utime and stime are the 12th and
    // 13th of them).
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((user + system) as f64 / TICKS)
}

/// CPU seconds of each process, by pid; `None` when the processes cannot be
/// read from here (PostgreSQL on another host or in another pid namespace).
#[derive(Clone, Debug)]
pub struct Reading(Option<HashMap<u32, f64>>);

impl Default for Reading {
    fn default() -> Self {
        Self(Some(HashMap::new()))
    }
}

impl Reading {
    /// Reads the processes `pids` now.
    pub fn of(pids: impl IntoIterator<Item = u32>) -> Self {
        Self(Some(pids.into_iter().filter_map(|pid| Some((pid, seconds(pid)?))).collect()))
    }

    /// Reads the `sessions` now, if they could be found (see [`sessions`]).
    pub fn of_sessions(sessions: Option<Vec<u32>>) -> Self {
        sessions.map_or(Self(None), Self::of)
    }

    /// CPU seconds used since `before` (NaN if either could not be read). A
    /// process started since counts whole; one gone since is not counted
    /// (its time is lost with it).
    pub fn since(&self, before: &Reading) -> f64 {
        let (Some(now), Some(before)) = (&self.0, &before.0) else { return f64::NAN };
        // A fold from 0.0: an empty `sum` of floats is -0.0, printed "-0.00".
        now.iter().fold(0.0, |spent, (pid, now)| spent + now - before.get(pid).copied().unwrap_or(0.0))
    }
}

/// The PostgreSQL sessions (backend pids) of `database` that `application`
/// opened; `None` when they are not PostgreSQL processes of this host, whose
/// CPU time the bench cannot read (a pid of another host or container names
/// an unrelated process here, or none).
pub async fn sessions(pool: &sqlx::PgPool, database: &str, application: &str) -> sqlx::Result<Option<Vec<u32>>> {
    let pids: Vec<i32> =
        sqlx::query_scalar("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2")
            .bind(database)
            .bind(application)
            .fetch_all(pool)
            .await?;
    let pids: Vec<u32> = pids.into_iter().filter_map(|pid| u32::try_from(pid).ok()).collect();
    let names: Vec<String> =
        pids.iter().filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()).collect();
    Ok(here(pids.len(), &names).then_some(pids))
}

/// Whether `listed` sessions are processes of this host, given the names of
/// those found in `/proc`. A session that ended since it was listed is not
/// there and proves nothing either way; at least one must be there, and all
/// those there must be PostgreSQL's.
fn here(listed: usize, names: &[String]) -> bool {
    listed == 0 || (!names.is_empty() && names.iter().all(|name| name.trim_end() == "postgres"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_time_is_user_and_system_ticks_after_the_name() {
        // pid, a name with a space and a parenthesis, then state .. stime.
        let stat = "4242 (svc (x) y) S 1 2 3 4 5 6 7 8 9 10 250 130 0 0 20 0 1 0";
        assert_eq!(parse(stat), Some(3.8));
        assert_eq!(parse("4242 (short) S 1 2"), None);
        assert!(seconds(std::process::id()).is_some());
        let none = Reading::of([u32::MAX]).since(&Reading::default());
        assert!(none == 0.0 && none.is_sign_positive(), "{none}");
        assert!(Reading::of_sessions(None).since(&Reading::default()).is_nan());
        assert!(Reading::default().since(&Reading::of_sessions(None)).is_nan());
    }

    #[test]
    fn sessions_are_here_when_those_found_are_postgres() {
        let names = |list: &[&str]| list.iter().map(|n| format!("{n}\n")).collect::<Vec<_>>();
        assert!(here(0, &[]));
        assert!(here(2, &names(&["postgres", "postgres"])));
        assert!(here(2, &names(&["postgres"])), "one ended since it was listed");
        assert!(!here(2, &[]), "none of them is a process here");
        assert!(!here(2, &names(&["postgres", "bash"])), "a pid naming another process");
    }
}
