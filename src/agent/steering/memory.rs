//! Earlier tool results of one step, to answer a repeated identical call without running it
//! (the `repeats` rule).

use serde_json::Value;

use crate::agent::tools::ToolKind;
use crate::ollama::ToolCall;

/// Earlier tool results of one step.
#[derive(Debug, Default)]
pub(crate) struct CallMemory {
    /// (tool, arguments) → its result, for reading tools since the last change, and for the
    /// last command.
    results: Vec<(String, Value, String)>,
    /// Calls answered from memory so far in this step.
    pub repeats: usize,
}

impl CallMemory {
    /// The earlier result of an identical call, counting the repeat.
    pub fn recall(&mut self, call: &ToolCall) -> Option<String> {
        let found = self.earlier(call)?.to_owned();
        self.repeats += 1;
        Some(found)
    }

    /// The remembered result of a call with the same tool and arguments.
    fn earlier(&self, call: &ToolCall) -> Option<&str> {
        let args = normalized(&call.function.arguments);
        self.results
            .iter()
            .find(|(name, a, _)| *name == call.function.name && *a == args)
            .map(|(_, _, text)| text.as_str())
    }

    /// Records a call of a tool of `kind` that ran. A reading tool's result is remembered. A
    /// command may have changed the workspace: every remembered result is dropped, then its
    /// own output is remembered (the same command again, with nothing in between, gets that
    /// output). A write drops everything.
    pub fn record(&mut self, call: &ToolCall, kind: ToolKind, result: &str) {
        if kind != ToolKind::Read {
            self.results.clear();
        }
        if kind != ToolKind::Write {
            self.results.push((
                call.function.name.clone(),
                normalized(&call.function.arguments),
                result.to_owned(),
            ));
        }
    }
}

/// Arguments as an object whatever the model sent (an object, or a JSON string of one).
fn normalized(args: &Value) -> Value {
    match args {
        Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| args.clone()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::steering::text::call;
    use serde_json::json;

    #[test]
    fn repeated_reads_are_recalled_until_something_changes() {
        let read = call("read_file", json!({"path": "a"}));
        let mut memory = CallMemory::default();
        assert_eq!(memory.recall(&read), None);
        memory.record(&read, ToolKind::Read, "alpha");
        // The same arguments as a JSON string are the same call.
        let as_string = call("read_file", json!("{\"path\": \"a\"}"));
        assert_eq!(memory.recall(&as_string).as_deref(), Some("alpha"));
        assert_eq!(
            memory.recall(&call("read_file", json!({"path": "b"}))),
            None
        );
        assert_eq!(memory.repeats, 1);
        let write = call("write_file", json!({"path": "a", "content": "x"}));
        memory.record(&write, ToolKind::Write, "replaced 'a'");
        assert_eq!(memory.recall(&read), None);
        assert_eq!(memory.recall(&write), None, "writes are never recalled");
        // A command drops what was read (it may have changed the files) but is recalled itself
        // until something else that changes things runs.
        memory.record(&read, ToolKind::Read, "alpha");
        let ls = call("run_command", json!({"argv": ["ls"]}));
        memory.record(&ls, ToolKind::Run, "a\n");
        assert_eq!(memory.recall(&read), None);
        assert_eq!(memory.recall(&ls).as_deref(), Some("a\n"));
        let other = call("run_command", json!({"argv": ["wc", "a"]}));
        memory.record(&other, ToolKind::Run, "1 a\n");
        assert_eq!(memory.recall(&ls), None);
        assert_eq!(memory.recall(&other).as_deref(), Some("1 a\n"));
    }
}
