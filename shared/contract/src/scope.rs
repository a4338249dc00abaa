//! Workspace API key scopes, presets and roles (contract §5).

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A least-privilege permission carried by a Workspace API key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Scope {
    #[serde(rename = "workspace:read")]
    WorkspaceRead,
    #[serde(rename = "agent:read")]
    AgentRead,
    #[serde(rename = "agent:write")]
    AgentWrite,
    #[serde(rename = "knowledge_source:read")]
    KnowledgeSourceRead,
    #[serde(rename = "knowledge_source:write")]
    KnowledgeSourceWrite,
    #[serde(rename = "public_chat:read")]
    PublicChatRead,
    #[serde(rename = "public_chat:write")]
    PublicChatWrite,
    #[serde(rename = "widget:read")]
    WidgetRead,
    #[serde(rename = "widget:write")]
    WidgetWrite,
}

impl Scope {
    /// Every scope, in the spec's order.
    pub const ALL: [Scope; 9] = [
        Self::WorkspaceRead,
        Self::AgentRead,
        Self::AgentWrite,
        Self::KnowledgeSourceRead,
        Self::KnowledgeSourceWrite,
        Self::PublicChatRead,
        Self::PublicChatWrite,
        Self::WidgetRead,
        Self::WidgetWrite,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::WorkspaceRead => "workspace:read",
            Self::AgentRead => "agent:read",
            Self::AgentWrite => "agent:write",
            Self::KnowledgeSourceRead => "knowledge_source:read",
            Self::KnowledgeSourceWrite => "knowledge_source:write",
            Self::PublicChatRead => "public_chat:read",
            Self::PublicChatWrite => "public_chat:write",
            Self::WidgetRead => "widget:read",
            Self::WidgetWrite => "widget:write",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        Self::ALL.into_iter().find(|scope| scope.as_str() == s)
    }

    pub fn is_read(self) -> bool {
        self.as_str().ends_with(":read")
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A named scope set for `api_key.create`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// The five `:read` scopes.
    ReadOnly,
    /// All nine scopes.
    Operator,
}

impl Preset {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::Operator => "operator",
        }
    }

    pub fn parse(s: &str) -> Option<Preset> {
        [Self::ReadOnly, Self::Operator].into_iter().find(|p| p.as_str() == s)
    }

    /// The scopes this preset expands to, in the spec's order.
    pub fn scopes(self) -> Vec<Scope> {
        match self {
            Self::ReadOnly => Scope::ALL.into_iter().filter(|s| s.is_read()).collect(),
            Self::Operator => Scope::ALL.to_vec(),
        }
    }
}

/// A member's role in a Workspace: `owner` > `admin` > `member`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Member,
    Admin,
    Owner,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::Admin => "admin",
            Self::Owner => "owner",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        [Self::Member, Self::Admin, Self::Owner].into_iter().find(|r| r.as_str() == s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_expand_per_contract() {
        let names = |p: Preset| p.scopes().iter().map(|s| s.as_str()).collect::<Vec<_>>();
        assert_eq!(
            names(Preset::ReadOnly),
            ["workspace:read", "agent:read", "knowledge_source:read", "public_chat:read", "widget:read"]
        );
        assert_eq!(names(Preset::Operator).len(), 9);
    }

    #[test]
    fn scope_names_round_trip() {
        for scope in Scope::ALL {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
            assert_eq!(serde_json::to_value(scope).unwrap(), scope.as_str());
        }
        assert_eq!(Scope::parse("agent:admin"), None);
    }

    #[test]
    fn roles_are_ordered() {
        assert!(Role::Owner > Role::Admin && Role::Admin > Role::Member);
    }
}
