use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::*;
use crate::config::{StoreConfig, Synchronous};
use crate::store::conformance;
use crate::task::TurnRole;

async fn open(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(&StoreConfig::sqlite_at(dir.path().join("db/tasks.db")))
        .await
        .unwrap()
}

/// A second, plain connection for looking at the file from outside the store.
fn peek(dir: &tempfile::TempDir) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.path().join("db/tasks.db")).unwrap()
}

/// The first column of the one row `sql` returns.
fn one_value<T: rusqlite::types::FromSql>(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> T {
    conn.query_row(sql, params, |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn count(conn: &rusqlite::Connection, table: &str) -> i64 {
    one_value(conn, &format!("SELECT COUNT(*) FROM {table}"), [])
}

/// No task and no image in the database file.
fn assert_nothing_stored(dir: &tempfile::TempDir) {
    let conn = peek(dir);
    for table in ["tasks", "images", "task_images"] {
        assert_eq!(count(&conn, table), 0, "{table}");
    }
}

/// A session of no owner, created in `store`.
async fn new_session(store: &SqliteStore) -> Session {
    let session = Session::new(None);
    store.create_session(&session).await.unwrap();
    session
}

fn image(bytes: &[u8]) -> TaskImage {
    TaskImage::new("image/png", STANDARD.encode(bytes))
}

fn full_task(session: Uuid) -> Task {
    let mut t = conformance::new_task(session);
    conformance::part_done(&mut t);
    t
}

#[tokio::test]
async fn migrations_run_once_and_refuse_a_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(&dir).await);
    let conn = peek(&dir);
    let version: i64 = one_value(&conn, "PRAGMA user_version", []);
    assert_eq!(version, schema::MIGRATIONS.len() as i64);
    let mode: String = one_value(&conn, "PRAGMA journal_mode", []);
    assert_eq!(mode, "wal");
    // Reopening finds nothing to do.
    drop(open(&dir).await);
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = SqliteStore::open(&StoreConfig::sqlite_at(dir.path().join("db/tasks.db")))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("schema version 99, newer"), "{err}");
}

#[tokio::test]
async fn one_process_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let err = SqliteStore::open(&StoreConfig::sqlite_at(dir.path().join("db/tasks.db")))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("another agent-mcp process is using"), "{err}");
    drop(store);
    drop(open(&dir).await);
}

#[tokio::test]
async fn synchronous_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = StoreConfig::sqlite_at(dir.path().join("t.db"));
    config.synchronous = Synchronous::Normal;
    let store = SqliteStore::open(&config).await.unwrap();
    let level: i64 = store
        .writer
        .run(|c| {
            Ok(c.pragma_query_value(None, "synchronous", |r| r.get(0))
                .unwrap())
        })
        .await
        .unwrap();
    assert_eq!(level, 1, "NORMAL is 1");
    assert_eq!(StoreConfig::default().synchronous, Synchronous::Full);
}

#[tokio::test]
async fn every_task_field_round_trips_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let session = Session::new(Some("alice".into()));
    store.create_session(&session).await.unwrap();
    let mut task = full_task(session.id);
    store.insert_task(&task).await.unwrap();
    assert_eq!(store.task(task.id).await.unwrap().as_ref(), Some(&task));

    task.state = TaskState::Completed;
    task.steps_done = 5;
    task.current_task.clear();
    task.tokens.add(10, 20);
    task.critical_path_tokens = 1234;
    task.result = "done".into();
    task.updated_at += Duration::from_nanos(1);
    store.update_task(&task).await.unwrap();
    // The optional fields round-trip when absent too.
    let bare = Task::new(session.id, None, "x".into(), None);
    store.insert_task(&bare).await.unwrap();
    drop(store);

    let store = open(&dir).await;
    assert_eq!(store.task(task.id).await.unwrap(), Some(task.clone()));
    assert_eq!(store.task(bare.id).await.unwrap(), Some(bare));
    assert_eq!(store.session(session.id).await.unwrap(), Some(session));
    assert!(store.task(Uuid::new_v4()).await.unwrap().is_none());
    let unknown = Task::new(Uuid::new_v4(), None, "x".into(), None);
    assert!(matches!(
        store.update_task(&unknown).await,
        Err(StoreError::UnknownTask(_))
    ));
}

#[tokio::test]
async fn sessions_keep_their_turns_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let session = new_session(&store).await;
    assert!(store.session_turns(session.id).await.unwrap().is_empty());
    let turns = [
        Turn {
            role: TurnRole::User,
            content: "one".into(),
        },
        Turn {
            role: TurnRole::Assistant,
            content: "two".into(),
        },
    ];
    store.append_turns(session.id, &turns).await.unwrap();
    store.append_turns(session.id, &turns[..1]).await.unwrap();
    drop(store);
    let store = open(&dir).await;
    let back = store.session_turns(session.id).await.unwrap();
    assert_eq!(back, [turns[0].clone(), turns[1].clone(), turns[0].clone()]);
    let other = Uuid::new_v4();
    assert!(matches!(
        store.session_turns(other).await,
        Err(StoreError::UnknownSession(_))
    ));
    assert!(matches!(
        store.append_turns(other, &turns).await,
        Err(StoreError::UnknownSession(_))
    ));
}

#[tokio::test]
async fn queued_tasks_come_back_in_order_without_image_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut t = Task::new(Uuid::new_v4(), None, format!("r{i}"), None);
        t.images = vec![image(format!("img{i}").as_bytes())];
        store.insert_task(&t).await.unwrap();
        ids.push(t.id);
    }
    drop(store);
    let store = open(&dir).await;
    let queued = store.tasks_in_state(TaskState::Queued).await.unwrap();
    assert_eq!(queued.iter().map(|t| t.id).collect::<Vec<_>>(), ids);
    assert!(queued.iter().all(|t| t.images.is_empty()));
    assert!(store.task(ids[0]).await.unwrap().unwrap().images.is_empty());
    assert_eq!(store.task_images(ids[3]).await.unwrap(), [image(b"img3")]);
    assert!(matches!(
        store.task_images(Uuid::new_v4()).await,
        Err(StoreError::UnknownTask(_))
    ));
}

#[tokio::test]
async fn an_image_is_stored_once_and_released_with_its_last_unfinished_task() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let conn = peek(&dir);
    let shared = image(&[7u8; 4096]);
    let own = image(&[9u8; 100]);
    let mut a = Task::new(Uuid::new_v4(), None, "a".into(), None);
    a.images = vec![shared.clone(), own.clone()];
    let mut b = Task::new(Uuid::new_v4(), None, "b".into(), None);
    b.images = vec![shared.clone(), shared.clone()];
    store.insert_task(&a).await.unwrap();
    store.insert_task(&b).await.unwrap();
    assert_eq!(count(&conn, "images"), 2, "one row per distinct image");
    assert_eq!(count(&conn, "task_images"), 4);
    // Stored as the base64 text the client sent (what Ollama takes), keyed by the decoded
    // bytes' hash.
    let hash: Vec<u8> = one_value(
        &conn,
        "SELECT sha256 FROM images WHERE data = ?1",
        [shared.data_base64.as_bytes()],
    );
    use sha2::Digest as _;
    assert_eq!(hash, sha2::Sha256::digest([7u8; 4096]).to_vec());
    assert_eq!(
        store.task_images(b.id).await.unwrap(),
        [shared.clone(), shared.clone()]
    );

    // a ends: its own image goes, the shared one stays for b.
    a.fail("x");
    store.update_task(&a).await.unwrap();
    assert_eq!(count(&conn, "images"), 1);
    assert!(store.task_images(a.id).await.unwrap().is_empty());
    assert_eq!(store.task_images(b.id).await.unwrap().len(), 2);
    // A running b still holds it.
    b.transition(TaskState::Running);
    store.update_task(&b).await.unwrap();
    assert_eq!(count(&conn, "images"), 1);
    b.transition(TaskState::Cancelled);
    store.update_task(&b).await.unwrap();
    assert_eq!(count(&conn, "images"), 0);
    assert_eq!(count(&conn, "task_images"), 0);
}

#[tokio::test]
async fn purge_respects_retention() {
    let dir = tempfile::tempdir().unwrap();
    conformance::purge_keeps_unfinished_and_recent_tasks(&open(&dir).await).await;
}

#[tokio::test]
async fn the_shared_store_contract() {
    let dir = tempfile::tempdir().unwrap();
    conformance::all(&open(&dir).await).await;
}

#[tokio::test]
async fn purged_sessions_take_their_turns_along() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    crate::store::conformance::sessions_go_with_their_last_task(&store).await;
    // Two sessions with one turn each are left, and the one brought back has none.
    let conn = peek(&dir);
    assert_eq!(count(&conn, "sessions"), 3);
    assert_eq!(count(&conn, "turns"), 2);
}

#[tokio::test]
async fn purge_runs_in_batches() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let then = SystemTime::now() - Duration::from_secs(7200);
    for _ in 0..(PURGE_BATCH + 3) {
        let mut t = Task::new(Uuid::new_v4(), None, "x".into(), None);
        t.state = TaskState::Completed;
        t.updated_at = then;
        store.insert_task(&t).await.unwrap();
    }
    let cutoff = SystemTime::now() - Duration::from_secs(3600);
    assert_eq!(
        store.purge_finished(cutoff).await.unwrap(),
        u64::from(PURGE_BATCH) + 3
    );
}

#[tokio::test]
async fn a_read_only_store_writes_nothing_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let session = new_session(&store).await;
    store.set_read_only(true).await.unwrap();
    let mut t = Task::new(session.id, None, "x".into(), None);
    t.images = vec![image(b"png")];
    let err = store.insert_task(&t).await.unwrap_err().to_string();
    assert!(err.contains("is read-only"), "{err}");
    assert!(err.contains("tasks.db"), "{err}");
    assert_nothing_stored(&dir);
    // Reads still work, and writes resume once allowed.
    assert!(store.session(session.id).await.unwrap().is_some());
    store.set_read_only(false).await.unwrap();
    store.insert_task(&t).await.unwrap();
}

#[tokio::test]
async fn a_full_disk_rolls_the_task_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    // `max_page_count` makes SQLite report SQLITE_FULL exactly as a full disk does.
    store
        .writer
        .run(|c| {
            let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
            c.pragma_update(None, "max_page_count", pages + 4).unwrap();
            Ok(())
        })
        .await
        .unwrap();
    let mut t = Task::new(Uuid::new_v4(), None, "x".into(), None);
    t.images = vec![image(&[1u8; 64 * 1024])];
    let err = store.insert_task(&t).await.unwrap_err().to_string();
    assert!(err.contains("is full"), "{err}");
    assert_nothing_stored(&dir);
    assert!(store.task(t.id).await.unwrap().is_none());
}

#[tokio::test]
async fn bad_base64_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let mut t = Task::new(Uuid::new_v4(), None, "x".into(), None);
    t.images = vec![image(b"ok"), TaskImage::new("image/png", "not base64!")];
    let err = store.insert_task(&t).await.unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidImage { index: 1, .. }),
        "{err}"
    );
    assert!(store.task(t.id).await.unwrap().is_none());
}

#[test]
fn timestamps_keep_nanoseconds_and_saturate() {
    let t = UNIX_EPOCH + Duration::new(1_786_000_000, 1);
    assert_eq!(queries::from_ns(queries::to_ns(t)), t);
    let before = UNIX_EPOCH - Duration::from_secs(5);
    assert_eq!(queries::from_ns(queries::to_ns(before)), before);
}

#[tokio::test]
async fn a_hash_from_the_image_layer_is_used_without_decoding_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let conn = peek(&dir);
    // Not base64 at all: had the store decoded it, the insert would fail.
    let mut pre_hashed = TaskImage::new("image/png", "already-validated");
    pre_hashed.sha256 = Some([5u8; 32]);
    let mut t = Task::new(Uuid::new_v4(), None, "x".into(), None);
    t.images = vec![pre_hashed];
    store.insert_task(&t).await.unwrap();
    let hash: Vec<u8> = one_value(&conn, "SELECT sha256 FROM images", []);
    assert_eq!(hash, vec![5u8; 32]);
    let loaded = store.task_images(t.id).await.unwrap();
    assert_eq!(*loaded[0].data_base64, "already-validated");
}

/// The database holds every caller's request texts: its folder is 0700 and its files 0600,
/// also when they were made readable by others before.
#[cfg(unix)]
#[tokio::test]
async fn the_database_folder_and_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let store = open(&dir).await;
    new_session(&store).await;
    let db = dir.path().join("db/tasks.db");
    assert_eq!(mode(&dir.path().join("db")), 0o700);
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let file = std::path::PathBuf::from(format!("{}{suffix}", db.display()));
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
    drop(store);
    // An older database left readable by others is narrowed at the next open.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let _store = open(&dir).await;
    assert_eq!(mode(&db), 0o600);
}

/// Group commit: writes that queue up while the writer is busy commit together, each under
/// its own savepoint, so one that fails is rolled back alone and the others are stored and
/// answered only after their commit.
#[tokio::test]
async fn writes_queued_together_commit_together_and_fail_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(&dir).await);
    let session = new_session(&store).await;
    // Hold the writer so what follows queues up behind it.
    let (held, release) = std::sync::mpsc::channel::<()>();
    let busy = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .writer
                .run(move |_| {
                    let _ = release.recv_timeout(std::time::Duration::from_secs(5));
                    Ok(())
                })
                .await
        })
    };
    let mut inserts = Vec::new();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let task = Task::new(session.id, None, "x".into(), None);
        tasks.push(task.id);
        let store = store.clone();
        inserts.push(tokio::spawn(async move { store.insert_task(&task).await }));
    }
    // One write in the middle of the group stores a row, then fails: its row must go.
    let failing = {
        let store = store.clone();
        let id = session.id;
        tokio::spawn(async move {
            store
                .writer
                .run(move |conn| {
                    conn.execute(
                        "UPDATE sessions SET owner = 'ghost' WHERE id = ?1",
                        [id.to_string()],
                    )
                    .map_err(|e| StoreError::Unavailable(e.to_string()))?;
                    Err::<(), _>(StoreError::Unavailable("refused on purpose".into()))
                })
                .await
        })
    };
    for _ in 0..20 {
        let task = Task::new(session.id, None, "y".into(), None);
        tasks.push(task.id);
        let store = store.clone();
        inserts.push(tokio::spawn(async move { store.insert_task(&task).await }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    held.send(()).unwrap();
    busy.await.unwrap().unwrap();
    for insert in inserts {
        insert.await.unwrap().unwrap();
    }
    let err = failing.await.unwrap().unwrap_err().to_string();
    assert!(err.contains("refused on purpose"), "{err}");
    // Every accepted task is on disk (read through a connection of its own); the failed
    // write left nothing behind.
    let conn = peek(&dir);
    assert_eq!(count(&conn, "tasks"), 40);
    let owner: Option<String> = one_value(
        &conn,
        "SELECT owner FROM sessions WHERE id = ?1",
        [session.id.to_string()],
    );
    assert_eq!(owner, None);
    for id in tasks {
        assert!(store.task(id).await.unwrap().is_some());
    }
}

/// The task cache answers reads without the database, so it must never show a state older than
/// one already committed: readers racing a stream of updates see the task's progress only move
/// forward, the last read equals the last write, and what the cache says matches the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_reads_never_go_back_in_time_and_match_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(open(&dir).await);
    let mut task = Task::new(Uuid::new_v4(), None, "count".into(), None);
    task.steps_total = 500;
    store.insert_task(&task).await.unwrap();
    let id = task.id;
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut seen = 0;
                let mut reads = 0u32;
                while seen < 500 {
                    let now = store.task(id).await.unwrap().unwrap().steps_done;
                    assert!(now >= seen, "read {now} after having read {seen}");
                    seen = now;
                    reads += 1;
                    tokio::task::yield_now().await;
                }
                reads
            })
        })
        .collect();
    for step in 1..=500 {
        task.steps_done = step;
        if step == 500 {
            task.transition(TaskState::Completed);
        }
        store.update_task(&task).await.unwrap();
        if step % 100 == 0 {
            // A purge forgets finished tasks from the cache; the readers must not mind.
            store.purge_finished(UNIX_EPOCH).await.unwrap();
        }
    }
    for r in readers {
        assert!(r.await.unwrap() > 0);
    }
    let cached = store.task(id).await.unwrap().unwrap();
    assert_eq!(cached.steps_done, 500);
    assert_eq!(cached.state, TaskState::Completed);
    let on_disk: i64 = one_value(
        &peek(&dir),
        "SELECT steps_done FROM tasks WHERE id = ?1",
        [id.to_string()],
    );
    assert_eq!(on_disk, 500);
    // A purge that deletes the finished task leaves nothing for the cache to answer.
    store
        .purge_finished(SystemTime::now() + Duration::from_secs(1))
        .await
        .unwrap();
    assert!(store.task(id).await.unwrap().is_none());
}

/// A large image, as base64 text of at least [`image_files::FILE_FROM`] characters.
fn large_image(seed: u8) -> TaskImage {
    let bytes: Vec<u8> = (0..image_files::FILE_FROM)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    image(&bytes)
}

fn image_dir(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("db/tasks.db-images")
}

/// The names in the image folder, sorted.
fn image_files_in(dir: &tempfile::TempDir) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(image_dir(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Waits (at most 5 s) for the writer's idle sweep to leave `expected` files.
async fn files_become(dir: &tempfile::TempDir, expected: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let names = image_files_in(dir);
        if names.len() == expected || std::time::Instant::now() > deadline {
            return names;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn sha_of(image: &TaskImage) -> Vec<u8> {
    use sha2::Digest as _;
    let bytes = STANDARD.decode(image.data_base64.as_bytes()).unwrap();
    sha2::Sha256::digest(bytes).to_vec()
}

/// The name of an image's file: its SHA-256 in lowercase hex.
fn hex_of(image: &TaskImage) -> String {
    sha_of(image).iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn a_large_image_is_a_private_file_named_by_its_hash_until_its_last_task_ends() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let conn = peek(&dir);
    let big = large_image(1);
    let small = image(&[9u8; 100]);
    let mut a = Task::new(Uuid::new_v4(), None, "a".into(), None);
    a.images = vec![big.clone(), small.clone()];
    let mut b = Task::new(Uuid::new_v4(), None, "b".into(), None);
    // Twice in one task, and another large image beside it: written at the same time.
    b.images = vec![big.clone(), big.clone(), large_image(7)];
    store.insert_task(&a).await.unwrap();
    store.insert_task(&b).await.unwrap();
    let mut both = vec![hex_of(&big), hex_of(&large_image(7))];
    both.sort();
    assert_eq!(image_files_in(&dir), both);
    assert_eq!(store.task_images(b.id).await.unwrap(), b.images);

    // One file per large image, shared; the small one stays a row.
    let file = image_dir(&dir).join(hex_of(&big));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), *big.data_base64);
    let (in_file, data_len): (i64, i64) = conn
        .query_row(
            "SELECT in_file, length(data) FROM images WHERE sha256 = ?1",
            [sha_of(&big)],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((in_file, data_len), (1, 0));
    assert_eq!(count(&conn, "images"), 3);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&image_dir(&dir)), 0o700);
        assert_eq!(mode(&file), 0o600);
    }
    // Read back in order, bytes as sent, as before and after reopening.
    assert_eq!(
        store.task_images(a.id).await.unwrap(),
        [big.clone(), small.clone()]
    );

    // a ends: b still links the file.
    a.fail("x");
    store.update_task(&a).await.unwrap();
    // The sweep that a's end marked, run now on the writer thread: it keeps what b links to.
    let files = store.files.clone();
    store
        .writer
        .run_alone(move |conn| {
            files.sweep(conn);
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(image_files_in(&dir), both, "b still needs them");
    assert_eq!(store.task_images(b.id).await.unwrap(), b.images);
    // b ends: the row goes with the commit, the file at the writer's next idle moment.
    b.transition(TaskState::Cancelled);
    store.update_task(&b).await.unwrap();
    assert_eq!(count(&conn, "images"), 0);
    assert_eq!(files_become(&dir, 0).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_large_image_survives_reopening_and_leftovers_of_a_crash_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let big = large_image(2);
    let mut t = Task::new(Uuid::new_v4(), None, "x".into(), None);
    t.images = vec![big.clone()];
    {
        let store = open(&dir).await;
        store.insert_task(&t).await.unwrap();
    }
    // What a crash can leave: a whole file no row names (killed between the file and the
    // commit) and a partial one; and a file of someone else's, which is not ours to remove.
    let orphan = hex_of(&large_image(3));
    std::fs::write(image_dir(&dir).join(&orphan), "orphan").unwrap();
    std::fs::write(image_dir(&dir).join(format!("{orphan}.partial")), "half").unwrap();
    std::fs::write(image_dir(&dir).join("README"), "mine").unwrap();
    let store = open(&dir).await;
    assert_eq!(image_files_in(&dir), [hex_of(&big), "README".to_owned()]);
    assert_eq!(store.task_images(t.id).await.unwrap(), [big]);
}

#[tokio::test]
async fn an_image_file_that_cannot_be_written_rolls_the_task_back_and_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    // A regular file where the folder was: every create inside it fails (also for root, whom
    // permissions would not stop).
    std::fs::remove_dir(image_dir(&dir)).unwrap();
    std::fs::write(image_dir(&dir), "").unwrap();
    let mut t = Task::new(Uuid::new_v4(), None, "x".into(), None);
    t.images = vec![large_image(4)];
    let err = store.insert_task(&t).await.unwrap_err().to_string();
    assert!(
        err.contains("cannot write the image file") && err.contains("nothing was stored"),
        "{err}"
    );
    assert!(err.contains("tasks.db-images"), "names the folder: {err}");
    assert_nothing_stored(&dir);
    assert!(store.task(t.id).await.unwrap().is_none());
    // The folder back: the same task goes in.
    std::fs::remove_file(image_dir(&dir)).unwrap();
    std::fs::create_dir(image_dir(&dir)).unwrap();
    store.insert_task(&t).await.unwrap();
    assert_eq!(store.task_images(t.id).await.unwrap(), t.images);
}

#[tokio::test]
async fn a_missing_image_file_is_a_store_error_that_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let mut t = Task::new(Uuid::new_v4(), None, "x".into(), None);
    t.images = vec![large_image(5)];
    store.insert_task(&t).await.unwrap();
    std::fs::remove_file(image_dir(&dir).join(hex_of(&t.images[0]))).unwrap();
    let err = store.task_images(t.id).await.unwrap_err().to_string();
    assert!(
        err.contains("is missing") && err.contains("-images folder"),
        "{err}"
    );
}

#[tokio::test]
async fn large_images_stored_in_rows_before_files_existed_still_load() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let old = large_image(6);
    let t = Task::new(Uuid::new_v4(), None, "x".into(), None);
    store.insert_task(&t).await.unwrap();
    // As a database of schema 4 holds it: the text in the row, in_file defaulted to 0.
    let conn = peek(&dir);
    let hash = sha_of(&old);
    conn.execute(
        "INSERT INTO images (sha256, data) VALUES (?1, ?2)",
        rusqlite::params![hash, old.data_base64.as_bytes()],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO task_images (task_id, position, mime_type, sha256) VALUES (?1, 0, 'image/png', ?2)",
        rusqlite::params![t.id.to_string(), hash],
    )
    .unwrap();
    assert_eq!(store.task_images(t.id).await.unwrap(), [old]);
    assert!(image_files_in(&dir).is_empty());
}
