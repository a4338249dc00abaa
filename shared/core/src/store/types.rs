//! Closed sets stored as PostgreSQL enums.
//!
//! `svc-contract` has no database dependency (the command-line client builds on
//! it), so the stored forms are declared here, each with conversions to and from
//! its contract type.

use svc_contract::Role;
use svc_contract::knowledge::{PlanAction, ProvenanceKind, ReconcileStatus, RevisionState};
use svc_contract::resources::{Language, WorkspaceStatus};

/// Declares a stored enum that mirrors a contract enum variant for variant.
macro_rules! stored_enum {
    ($(#[$meta:meta])* $name:ident = $pg:literal <=> $contract:ident { $($variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, sqlx::Type)]
        #[sqlx(type_name = $pg, rename_all = "snake_case")]
        pub enum $name {
            $($variant),+
        }

        impl From<$name> for $contract {
            fn from(value: $name) -> Self {
                match value {
                    $($name::$variant => $contract::$variant),+
                }
            }
        }

        impl From<$contract> for $name {
            fn from(value: $contract) -> Self {
                match value {
                    $($contract::$variant => $name::$variant),+
                }
            }
        }
    };
}

stored_enum!(
    /// `workspace_status`
    StoredWorkspaceStatus = "workspace_status" <=> WorkspaceStatus { Active, Archived }
);
stored_enum!(
    /// `member_role`
    StoredRole = "member_role" <=> Role { Member, Admin, Owner }
);
stored_enum!(
    /// `agent_language`
    StoredLanguage = "agent_language" <=> Language { En, Es }
);
/// The index keeps the same enum for its documents' language.
impl From<StoredLanguage> for svc_search::Language {
    fn from(value: StoredLanguage) -> Self {
        match value {
            StoredLanguage::En => Self::En,
            StoredLanguage::Es => Self::Es,
        }
    }
}

stored_enum!(
    /// `reconcile_status`
    StoredReconcileStatus = "reconcile_status" <=> ReconcileStatus { Planned, Applying, Completed, Failed }
);
stored_enum!(
    /// `plan_action`
    StoredPlanAction = "plan_action" <=> PlanAction { Add, Noop, Replace, Delete }
);
stored_enum!(
    /// `provenance_kind`
    StoredProvenanceKind = "provenance_kind" <=> ProvenanceKind { Repository, Url, Manual }
);

/// Where a revision is in its life (`revision_state`):
///
/// ```text
/// pending ──► processing ──► active ──► replaced
///    │            │  ▲
///    └────────────┴──┴──► failed          (processing ──► processing: a lease
///                                          expired and another worker took it)
/// ```
///
/// `replaced` is internal: an active revision a newer one took over from.
/// PostgreSQL holds the one list of these moves and refuses any other (the
/// trigger `knowledge_revisions_transition`, migration 0012); the statements
/// that move a revision name the state they expect it in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, sqlx::Type)]
#[sqlx(type_name = "revision_state", rename_all = "snake_case")]
pub enum StoredRevisionState {
    Pending,
    Processing,
    Active,
    Failed,
    Replaced,
}

impl StoredRevisionState {
    /// Still to be processed: pending, or taken by a worker.
    pub fn is_unfinished(self) -> bool {
        matches!(self, Self::Pending | Self::Processing)
    }

    /// Its content counts toward `knowledge_bytes`.
    pub fn holds_content(self) -> bool {
        matches!(self, Self::Pending | Self::Processing | Self::Active)
    }

    /// As the contract shows it; `None` for `replaced`, which is never shown.
    pub fn shown(self) -> Option<RevisionState> {
        match self {
            Self::Pending => Some(RevisionState::Pending),
            Self::Processing => Some(RevisionState::Processing),
            Self::Active => Some(RevisionState::Active),
            Self::Failed => Some(RevisionState::Failed),
            Self::Replaced => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StoredRevisionState::{self, *};

    const ALL: [StoredRevisionState; 5] = [Pending, Processing, Active, Failed, Replaced];

    #[test]
    fn what_a_state_holds_and_shows() {
        assert!(ALL.iter().filter(|s| s.holds_content()).eq([Pending, Processing, Active].iter()));
        assert_eq!(Replaced.shown(), None);
    }
}
