//! Plans, their Entitlements and Limits (contract §6).
//!
//! A Workspace's row stores its plan and dates; whether it is active, its status,
//! features and limits are derived here, in one place, from those and the clock.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;
use svc_contract::resources::EntitlementChannels;
use svc_contract::{Operation, Problem, ProblemCode};

use time::{Duration, OffsetDateTime};

/// Length of a new Workspace's trial.
pub const TRIAL_LENGTH: Duration = Duration::days(14);
/// Length of a paid period set by an operator.
pub const PERIOD_LENGTH: Duration = Duration::days(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    Trial,
    Starter,
    Pro,
    Expired,
}

impl Plan {
    pub fn parse(s: &str) -> Option<Plan> {
        [Self::Trial, Self::Starter, Self::Pro, Self::Expired].into_iter().find(|p| p.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trial => "trial",
            Self::Starter => "starter",
            Self::Pro => "pro",
            Self::Expired => "expired",
        }
    }

    pub fn display_name(self) -> &'static str {
        match self {
            Self::Trial => "Trial",
            Self::Starter => "Starter",
            Self::Pro => "Pro",
            Self::Expired => "Expired",
        }
    }

    /// The plan's limit for `key`, before operator overrides.
    pub fn default_limit(self, key: LimitKey) -> u64 {
        use LimitKey::*;
        match (self, key) {
            (Self::Trial | Self::Expired, Agents) => 3,
            (Self::Trial | Self::Expired, ApiKeys) => 5,
            (Self::Trial | Self::Expired, KnowledgeSources) => 200,
            (Self::Trial | Self::Expired, KnowledgeBytes) => 50_000_000,
            (Self::Trial | Self::Expired, Conversations) => 500,
            (Self::Starter, Agents) => 10,
            (Self::Starter, ApiKeys) => 20,
            (Self::Starter, KnowledgeSources) => 1_000,
            (Self::Starter, KnowledgeBytes) => 500_000_000,
            (Self::Starter, Conversations) => 5_000,
            (Self::Pro, Agents) => 50,
            (Self::Pro, ApiKeys) => 100,
            (Self::Pro, KnowledgeSources) => 10_000,
            (Self::Pro, KnowledgeBytes) => 5_000_000_000,
            (Self::Pro, Conversations) => 50_000,
        }
    }
}

/// The keys of `limits` and `usage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LimitKey {
    Agents,
    ApiKeys,
    KnowledgeSources,
    KnowledgeBytes,
    Conversations,
}

impl LimitKey {
    pub const ALL: [LimitKey; 5] =
        [Self::Agents, Self::ApiKeys, Self::KnowledgeSources, Self::KnowledgeBytes, Self::Conversations];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agents => "agents",
            Self::ApiKeys => "api_keys",
            Self::KnowledgeSources => "knowledge_sources",
            Self::KnowledgeBytes => "knowledge_bytes",
            Self::Conversations => "conversations",
        }
    }

    pub fn parse(s: &str) -> Option<LimitKey> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for LimitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Usage counted against the limits, by limit key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub agents: i64,
    pub api_keys: i64,
    pub knowledge_sources: i64,
    pub knowledge_bytes: i64,
    /// Conversations of the current calendar month (UTC).
    pub conversations: i64,
}

impl Usage {
    pub fn get(&self, key: LimitKey) -> i64 {
        match key {
            LimitKey::Agents => self.agents,
            LimitKey::ApiKeys => self.api_keys,
            LimitKey::KnowledgeSources => self.knowledge_sources,
            LimitKey::KnowledgeBytes => self.knowledge_bytes,
            LimitKey::Conversations => self.conversations,
        }
    }

    /// `usage` as the Entitlement reports it.
    pub fn to_map(&self) -> BTreeMap<String, u64> {
        LimitKey::ALL.iter().map(|k| (k.as_str().to_owned(), self.get(*k).max(0) as u64)).collect()
    }
}

/// A change of usage: how much each counter grows (negative: shrinks).
pub type Delta = Usage;

impl Delta {
    /// A change of one counter.
    pub fn of(key: LimitKey, amount: i64) -> Self {
        let mut delta = Self::default();
        match key {
            LimitKey::Agents => delta.agents = amount,
            LimitKey::ApiKeys => delta.api_keys = amount,
            LimitKey::KnowledgeSources => delta.knowledge_sources = amount,
            LimitKey::KnowledgeBytes => delta.knowledge_bytes = amount,
            LimitKey::Conversations => delta.conversations = amount,
        }
        delta
    }

    /// This change and `other` together.
    pub fn and(self, other: Delta) -> Self {
        Self {
            agents: self.agents + other.agents,
            api_keys: self.api_keys + other.api_keys,
            knowledge_sources: self.knowledge_sources + other.knowledge_sources,
            knowledge_bytes: self.knowledge_bytes + other.knowledge_bytes,
            conversations: self.conversations + other.conversations,
        }
    }
}

/// Features every plan but `expired` carries.
pub const FEATURES: [&str; 6] = ["agents", "knowledge", "public_chat", "widget", "api_keys", "mcp"];

/// A Workspace's stored Entitlement.
#[derive(Clone, Debug, PartialEq)]
pub struct Entitlement {
    pub plan: Plan,
    pub trial_end: Option<OffsetDateTime>,
    pub period_end: Option<OffsetDateTime>,
    pub cancel_at_period_end: bool,
    /// Operator-set limits that replace the plan's.
    pub limit_overrides: BTreeMap<String, u64>,
}

impl Entitlement {
    /// Reads the stored plan name and overrides; unknown plans fail closed.
    pub fn from_row(
        plan: &str,
        trial_end: Option<OffsetDateTime>,
        period_end: Option<OffsetDateTime>,
        cancel_at_period_end: bool,
        limit_overrides: &Value,
    ) -> Self {
        let limit_overrides = limit_overrides
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
            .collect();
        Self {
            plan: Plan::parse(plan).unwrap_or(Plan::Expired),
            trial_end,
            period_end,
            cancel_at_period_end,
            limit_overrides,
        }
    }

    /// `trialing`, `active` or `expired`.
    pub fn status(&self, now: OffsetDateTime) -> &'static str {
        match self.plan {
            Plan::Trial if self.trial_end.is_some_and(|end| end > now) => "trialing",
            Plan::Starter | Plan::Pro => "active",
            Plan::Trial | Plan::Expired => "expired",
        }
    }

    /// Whether the Workspace may use the product now. Anything else fails closed.
    pub fn is_active(&self, now: OffsetDateTime) -> bool {
        self.status(now) != "expired"
    }

    pub fn features(&self) -> Vec<String> {
        match self.plan {
            Plan::Expired => Vec::new(),
            _ => FEATURES.iter().map(|f| (*f).to_owned()).collect(),
        }
    }

    pub fn limit(&self, key: LimitKey) -> u64 {
        self.limit_overrides.get(key.as_str()).copied().unwrap_or_else(|| self.plan.default_limit(key))
    }

    pub fn limits(&self) -> BTreeMap<String, u64> {
        LimitKey::ALL.iter().map(|k| (k.as_str().to_owned(), self.limit(*k))).collect()
    }

    pub fn channels(&self) -> EntitlementChannels {
        let allowed = match self.plan {
            Plan::Expired => Vec::new(),
            _ => vec!["public_chat".to_owned(), "widget".to_owned()],
        };
        EntitlementChannels { allowed, max_active: None }
    }

    /// A limit as stored counters compare it.
    pub fn limit_i64(&self, key: LimitKey) -> i64 {
        i64::try_from(self.limit(key)).unwrap_or(i64::MAX)
    }

    /// Every limit, in the order of [`LimitKey::ALL`], as stored counters compare them.
    pub fn limit_array(&self) -> [i64; 5] {
        LimitKey::ALL.map(|key| self.limit_i64(key))
    }

    /// `limit_exceeded` when adding `requested` to `current` would pass the limit.
    pub fn check_limit(&self, key: LimitKey, current: u64, requested: u64) -> Result<(), Problem> {
        let max = self.limit(key);
        if current.saturating_add(requested) <= max {
            return Ok(());
        }
        Err(limit_problem(key, max, current.min(i64::MAX as u64) as i64, requested.min(i64::MAX as u64) as i64))
    }
}

/// Whether `op` may act now on a Workspace in this state (contract §4, §6). The
/// call path asks before the transaction; every mutation asks again under the
/// Workspace lock, so an archive or plan change that committed in between still
/// fails closed.
pub fn admit(op: &Operation, archived: bool, entitlement: &Entitlement, now: OffsetDateTime) -> Result<(), Problem> {
    if op.lists(ProblemCode::WorkspaceArchived) && archived {
        return Err(workspace_archived());
    }
    if op.lists(ProblemCode::EntitlementRequired) && !entitlement.is_active(now) {
        return Err(entitlement_required(entitlement, now));
    }
    Ok(())
}

/// The limit `delta` would pass from `current`, if any.
pub fn refused(current: &Usage, entitlement: &Entitlement, delta: &Delta) -> Option<Problem> {
    let limit = |key: LimitKey| i64::try_from(entitlement.limit(key)).unwrap_or(i64::MAX);
    let refused = LimitKey::ALL
        .into_iter()
        .find(|key| delta.get(*key) > 0 && current.get(*key).saturating_add(delta.get(*key)) > limit(*key));
    refused.map(|key| limit_problem(key, entitlement.limit(key), current.get(key), delta.get(key)))
}

fn limit_problem(key: LimitKey, max: u64, current: i64, requested: i64) -> Problem {
    Problem::new(ProblemCode::LimitExceeded, format!("This would exceed the Workspace's {key} limit of {max}."))
        .with_detail("limit", key.as_str())
        .with_detail("max", max)
        .with_detail("current", current.max(0))
        .with_detail("requested", requested.max(0))
}

/// `workspace_archived`: the Workspace is archived (fail closed).
pub fn workspace_archived() -> Problem {
    Problem::new(ProblemCode::WorkspaceArchived, "The Workspace is archived.")
}

/// `entitlement_required`: the Workspace's Entitlement is not active (fail closed).
pub fn entitlement_required(entitlement: &Entitlement, now: OffsetDateTime) -> Problem {
    Problem::new(
        ProblemCode::EntitlementRequired,
        "The Workspace's plan does not allow this; its Entitlement is not active.",
    )
    .with_detail("status", entitlement.status(now))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::macros::datetime;

    use super::*;

    const NOW: OffsetDateTime = datetime!(2026-11-22 12:00 UTC);

    fn trial(end: OffsetDateTime) -> Entitlement {
        Entitlement::from_row("trial", Some(end), None, false, &json!({}))
    }

    #[test]
    fn trial_is_active_until_its_end() {
        let running = trial(NOW + Duration::seconds(1));
        assert_eq!((running.status(NOW), running.is_active(NOW)), ("trialing", true));
        let over = trial(NOW);
        assert_eq!((over.status(NOW), over.is_active(NOW)), ("expired", false));
    }

    #[test]
    fn paid_and_expired_plans() {
        let starter = Entitlement::from_row("starter", None, Some(NOW), false, &json!({}));
        assert_eq!((starter.status(NOW), starter.is_active(NOW)), ("active", true));
        let expired = Entitlement::from_row("expired", None, None, false, &json!({}));
        assert_eq!((expired.status(NOW), expired.is_active(NOW)), ("expired", false));
        assert!(expired.features().is_empty());
        let unknown = Entitlement::from_row("platinum", None, None, false, &json!({}));
        assert!(!unknown.is_active(NOW), "unknown plans fail closed");
    }

    #[test]
    fn trial_limits_and_overrides() {
        let e = Entitlement::from_row("trial", Some(NOW), None, false, &json!({"agents": 7}));
        let limits = e.limits();
        assert_eq!(limits["agents"], 7);
        assert_eq!(limits["api_keys"], 5);
        assert_eq!(limits["knowledge_sources"], 200);
        assert_eq!(limits["knowledge_bytes"], 50_000_000);
        assert_eq!(limits["conversations"], 500);
    }

    #[test]
    fn limit_check_boundary() {
        let e = trial(NOW);
        assert!(e.check_limit(LimitKey::Agents, 2, 1).is_ok());
        let problem = e.check_limit(LimitKey::Agents, 3, 1).unwrap_err();
        assert_eq!(
            Value::Object(problem.details.unwrap()),
            json!({"limit": "agents", "max": 3, "current": 3, "requested": 1})
        );
    }
}
