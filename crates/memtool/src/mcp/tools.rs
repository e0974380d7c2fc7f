//! The MCP tools as the command line defines them: each tool's input schema
//! is read from the clap definition of its command, and a call's arguments
//! become that command's command line, checked by the same parser. An option
//! added to a command is a tool argument with no change here.

use std::sync::Arc;

use clap::builder::ArgAction;
use clap::{Arg, CommandFactory, Parser};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Value};

/// The commands served as tools (those that answer with one JSON document).
pub const TOOLS: &[&str] = &["summary", "peak", "leaks", "diff", "frag", "oom", "ranks"];

/// Options a tool does not take: the output is the server's to choose (a JSON
/// document and a digest, never a file), and listing runs is no analysis.
const NOT_TOOL_ARGUMENTS: &[&str] = &["format", "output", "width", "list_runs"];

/// The property that holds a command's profiles.
const FILES: &str = "files";

/// The clap definition of command `name`, when it is one of [`TOOLS`].
fn command(name: &str) -> Option<clap::Command> {
    if !TOOLS.contains(&name) {
        return None;
    }
    crate::Cli::command().find_subcommand(name).cloned()
}

/// The options of `command` a tool takes, with their property names, in
/// the order `--help` lists them.
fn options(command: &clap::Command) -> Vec<(String, &Arg)> {
    let mut options: Vec<(String, &Arg)> = command
        .get_arguments()
        .filter_map(|arg| {
            let long = arg.get_long()?;
            let id = arg.get_id().as_str();
            if NOT_TOOL_ARGUMENTS.contains(&id) || matches!(arg.get_action(), ArgAction::Help) {
                return None;
            }
            Some((long.replace('-', "_"), arg))
        })
        .collect();
    options.sort_by_key(|(_, arg)| arg.get_display_order());
    options
}

/// Every tool, in [`TOOLS`] order.
pub fn list() -> Vec<Tool> {
    TOOLS
        .iter()
        .filter_map(|name| command(name).map(|c| tool(name, &c)))
        .collect()
}

fn tool(name: &'static str, command: &clap::Command) -> Tool {
    let mut properties = serde_json::Map::new();
    let files_help = command
        .get_arguments()
        .find(|a| a.get_id().as_str() == FILES)
        .and_then(|a| a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    properties.insert(
        FILES.into(),
        json!({
            "type": "array",
            "items": { "type": "string" },
            "minItems": 1,
            "description": format!(
                "{} Paths are relative to the server's --root; nothing outside it is read, and `-` (stdin) is refused.",
                files_help.replace("(`-` for stdin)", "").trim_end_matches('.').trim_end()
            ),
        }),
    );
    for (property, arg) in options(command) {
        properties.insert(property, schema(arg));
    }
    let about = command
        .get_long_about()
        .or(command.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default();
    let description = format!(
        "{about}\n\nReturns a digest in Markdown (headline figures, `top` rows per table) as text \
         and the command's whole JSON document (schema memtool/{name}/v1) as structured content: \
         the same document as `memtool {name} --format json`."
    );
    let schema: JsonObject = match json!({
        "type": "object",
        "properties": properties,
        "required": [FILES],
        "additionalProperties": false,
    }) {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    };
    Tool::new(name, description, Arc::new(schema))
        .with_annotations(ToolAnnotations::new().read_only(true))
}

/// The JSON schema of one option.
fn schema(arg: &Arg) -> Value {
    let mut help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    let default = arg
        .get_default_values()
        .first()
        .map(|d| d.to_string_lossy());
    if arg.get_id().as_str() == "top" {
        // The command line's `--top`: the rows of its text tables, here the
        // digest's.
        help = format!(
            "Rows per table in the digest (default {}); the JSON document keeps every row.",
            default.unwrap_or_default()
        );
    } else if let Some(default) = default {
        help.push_str(&format!(" Default: {default}."));
    }
    let aliases: Vec<&str> = arg.get_visible_aliases().unwrap_or_default();
    if !aliases.is_empty() {
        help.push_str(&format!(" Also accepted as: {}.", aliases.join(", ")));
    }
    let mut schema = match arg.get_action() {
        ArgAction::SetTrue => json!({ "type": "boolean" }),
        ArgAction::Append => json!({ "type": "array", "items": value_schema(arg) }),
        _ => value_schema(arg),
    };
    if let Value::Object(object) = &mut schema {
        object.insert("description".into(), Value::String(help));
    }
    schema
}

/// The schema of one value of an option: one of its names, a count, or text
/// the command's own parser reads (sizes such as `16GiB` among them).
fn value_schema(arg: &Arg) -> Value {
    let names: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    if !names.is_empty() {
        return json!({ "type": "string", "enum": names });
    }
    if arg.get_value_parser().type_id() == std::any::TypeId::of::<usize>() {
        return json!({ "type": "integer", "minimum": 0 });
    }
    json!({ "type": "string" })
}

/// A tool call: the command line it stands for.
#[derive(Debug)]
pub struct Call {
    /// The arguments after `memtool`: the command, its options, `--format
    /// mcp`, `--`, then the files.
    pub argv: Vec<String>,
    /// The files, as given (for the digest's first line).
    pub files: Vec<String>,
}

/// The command line of tool `name` called with `arguments`, checked by the
/// command line's own parser; an error is the one line an agent gets.
pub fn command_line(name: &str, arguments: &JsonObject) -> Result<Call, String> {
    let command = command(name)
        .ok_or_else(|| format!("no tool named `{name}` (there are: {})", TOOLS.join(", ")))?;
    let files = match arguments.get(FILES) {
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| scalar(v).ok_or_else(|| format!("`{FILES}` holds paths, not {v}")))
            .collect::<Result<Vec<_>, _>>()?,
        Some(Value::String(one)) => vec![one.clone()],
        Some(other) => return Err(format!("`{FILES}` is a list of paths, not {other}")),
        None => return Err(format!("`{FILES}` is required: the profiles to read")),
    };
    if files.iter().any(|f| f == "-") {
        return Err(
            "-: standard input is the MCP channel; give a file under the server's root".into(),
        );
    }
    let mut argv = vec![name.to_string()];
    let known = options(&command);
    for (key, value) in arguments {
        if key == FILES {
            continue;
        }
        let Some((_, arg)) = known.iter().find(|(property, arg)| {
            property == key
                || arg
                    .get_visible_aliases()
                    .unwrap_or_default()
                    .iter()
                    .any(|alias| alias.replace('-', "_") == *key)
        }) else {
            let names: Vec<&str> = std::iter::once(FILES)
                .chain(known.iter().map(|(p, _)| p.as_str()))
                .collect();
            return Err(format!(
                "{name} takes no argument `{key}` (it takes: {})",
                names.join(", ")
            ));
        };
        let long = arg.get_long().unwrap_or_default();
        match (arg.get_action(), value) {
            (ArgAction::SetTrue, Value::Bool(true)) => argv.push(format!("--{long}")),
            (ArgAction::SetTrue, Value::Bool(false)) => {}
            (ArgAction::SetTrue, other) => {
                return Err(format!("`{key}` is true or false, not {other}"))
            }
            (_, Value::Null) => {}
            (ArgAction::Append, Value::Array(items)) => {
                for item in items {
                    let text =
                        scalar(item).ok_or_else(|| format!("`{key}` holds text, not {item}"))?;
                    argv.push(format!("--{long}={text}"));
                }
            }
            (_, other) => {
                let text =
                    scalar(other).ok_or_else(|| format!("`{key}` is a value, not {other}"))?;
                argv.push(format!("--{long}={text}"));
            }
        }
    }
    argv.push("--format=mcp".into());
    argv.push("--".into());
    argv.extend(files.iter().cloned());
    // The command line's own parser has the last word on every value.
    let parsed = crate::Cli::try_parse_from(
        std::iter::once("memtool").chain(argv.iter().map(String::as_str)),
    );
    if let Err(e) = parsed {
        let text = e.to_string();
        let line = text.lines().next().unwrap_or_default();
        return Err(line.trim_start_matches("error: ").to_string());
    }
    Ok(Call { argv, files })
}

/// A JSON string or number as the text a command line would hold.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}
