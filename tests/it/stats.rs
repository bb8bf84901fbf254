//! `gpuenv db stats`.

use crate::support::{gpuenv, json};

#[test]
fn stats_count_records_unverified_facts_and_newest() {
    let run = gpuenv(&["db", "stats", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    let kinds = doc["kinds"].as_array().unwrap();
    let get = |k: &str| kinds.iter().find(|x| x["kind"] == k).unwrap().clone();
    assert!(get("gpu")["records"].as_u64().unwrap() >= 45);
    assert!(get("cuda")["records"].as_u64().unwrap() >= 56);
    assert!(get("python")["records"].as_u64().unwrap() >= 9);
    assert_eq!(get("torch")["newest"], "2.15.0");
    assert_eq!(get("python")["newest"], "3.15");
    assert!(get("torch")["unverified_facts"].as_u64().unwrap() > 0);

    let human = gpuenv(&["db", "stats"]);
    assert!(
        human
            .stdout
            .starts_with("kind        records  unverified  newest\n"),
        "{}",
        human.stdout
    );
    assert!(
        human
            .stdout
            .lines()
            .any(|l| l.starts_with("torch") && l.ends_with("2.15.0")),
        "{}",
        human.stdout
    );
}

#[test]
fn compat_db_readme_shows_current_stats() {
    let readme = std::fs::read_to_string(crate::support::root().join("compat-db/README.md")).unwrap();
    let block = readme
        .split("<!-- stats:begin -->\n```\n")
        .nth(1)
        .and_then(|rest| rest.split("```\n<!-- stats:end -->").next())
        .expect("compat-db/README.md has a stats block");
    let run = gpuenv(&["db", "stats"]);
    assert_eq!(
        block, run.stdout,
        "compat-db/README.md's stats block is stale: paste `gpuenv db stats`"
    );
}

/// `db stats` names the oldest `checked` and counts the records checked more than 90 days
/// before the database's date (its newest `checked`), in text and JSON.
#[test]
fn stats_name_the_oldest_check_and_count_records_left_behind() {
    let db = crate::support::trimmed_db(&[]);
    let dir = db.path().to_str().unwrap();
    let before = json(&gpuenv(&["--db", dir, "db", "stats", "--json"]));
    assert_eq!(before["stale_after_days"], 90);
    let stale_before = before["stale_records"].as_u64().unwrap();
    for file in ["driver/r535.toml", "gpu/h100-sxm.toml"] {
        let path = db.path().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let dated: Vec<String> = text
            .lines()
            .map(|l| {
                if l.starts_with("checked = ") {
                    "checked = \"2025-01-15\"".to_string()
                } else {
                    l.to_string()
                }
            })
            .collect();
        std::fs::write(&path, dated.join("\n") + "\n").unwrap();
    }
    let run = gpuenv(&["--db", dir, "db", "stats", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc = json(&run);
    assert_eq!(doc["oldest_checked"], "2025-01-15");
    assert_eq!(doc["stale_records"].as_u64().unwrap(), stale_before + 2, "{doc}");
    assert_eq!(doc["db_date"], before["db_date"], "the newest check is unchanged");
    let human = gpuenv(&["--db", dir, "db", "stats"]);
    let last = human.stdout.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!(
            "oldest: 2025-01-15 ({} records checked more than 90 days before the newest)",
            stale_before + 2
        ),
        "{}",
        human.stdout
    );
}
