//! Closed sets stored as PostgreSQL enums.
//!
//! `svc-contract` has no database dependency (the command-line client builds on
//! it), so the stored forms are declared here, each with conversions to and from
//! its contract type.

use svc_contract::Role;
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
