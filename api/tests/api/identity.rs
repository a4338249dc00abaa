use serde_json::json;
use sqlx::PgPool;

use crate::helpers::{TestApp, assert_ok};

#[sqlx::test(migrations = "../migrations")]
async fn identity_status_for_a_user_with_one_workspace(pool: PgPool) {
    let app = TestApp::new(pool).await;
    let (user, ws) = app.owner("alice").await;
    let data = assert_ok(
        &app.op("identity/status", &user.token, None, json!({}))
            .await,
    );
    assert_eq!(data["status"], "ready");
    assert_eq!(data["auth"]["mode"], "user");
    assert_eq!(data["workspace"]["id"], ws);
}
