//! `agent.yaml` through `Config::from_yaml`: parse, validate, and print-then-reparse.

#![no_main]

use agent_mcp::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = Config::from_yaml(text) else {
        return;
    };
    config
        .validate()
        .expect("from_yaml only returns valid configs");
    // What `check-config` prints must load again, and printing is stable from then on.
    let printed = serde_yaml_ng::to_string(&config).expect("a config serializes");
    let again = Config::from_yaml(&printed)
        .unwrap_or_else(|e| panic!("printed config does not load: {e}\n{printed}"));
    let reprinted = serde_yaml_ng::to_string(&again).expect("a config serializes");
    assert_eq!(printed, reprinted);
});
