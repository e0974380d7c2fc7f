//! `memtool mcp`: a Model Context Protocol server over stdio, for coding
//! agents. Its tools are the commands that answer with one JSON document
//! (`tools`); each call runs the command itself — this binary executed again
//! as `memtool COMMAND ... --format mcp` — and returns the command's JSON
//! document and a Markdown digest of its tables.
//!
//! Why a process per call, not the analysis in the server: a long-lived
//! server must outlive the profile that does not fit. A call's child is
//! supervised as every command is (`supervise.rs`): running out of memory is
//! the command's one-line error, and the server goes on. The child also
//! carries the command line's caps (`--max-decompressed`, the 4 GiB default)
//! and errors unchanged, and the JSON is the command line's by construction.
//! One call runs at a time, so two large profiles never share the memory;
//! a call the client cancels kills its child.
//!
//! Confinement: the child runs in the root with `MEMTOOL_ROOT` set, and
//! `inputs.rs`, the one place files are opened, refuses any file or folder
//! that resolves outside it (checked on the opened file, so a link swapped in
//! after the check is caught). No call writes a file: the output options are
//! not tool arguments, and standard input, the protocol channel, is refused.

mod tools;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use anyhow::{Context, Result};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio::sync::Semaphore;

use crate::inputs::ROOT_VAR;

/// What the server tells a client about itself.
const INSTRUCTIONS: &str = "memtool reads accelerator memory profiles (XProf .xplane.pb, \
JAX pprof, PyTorch CUDA snapshots, PyTorch traces and memory timelines) and answers what was \
live at the peak (peak), what grew (leaks, diff), why an allocation failed (oom), how \
fragmented the allocator was (frag), and an overview (summary). Give file paths relative to \
the server's root. Each tool returns a short Markdown digest; the whole JSON document is \
the structured content. Raise `top` for more rows.";

/// The server: the root it reads under and the one call at a time it runs.
#[derive(Clone)]
struct Server {
    root: PathBuf,
    exe: PathBuf,
    one_at_a_time: Arc<Semaphore>,
}

/// Serves MCP on standard input and output until the client closes them.
pub fn serve(root: &std::path::Path) -> Result<()> {
    let root = std::fs::canonicalize(root)
        .with_context(|| format!("--root {}: no such folder", root.display()))?;
    if !root.is_dir() {
        anyhow::bail!("--root {}: not a folder", root.display());
    }
    let exe = std::env::current_exe().context("cannot find memtool's own executable")?;
    let server = Server {
        root,
        exe,
        one_at_a_time: Arc::new(Semaphore::new(1)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the MCP server's runtime")?;
    runtime.block_on(async move {
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| anyhow::anyhow!("MCP session did not start: {e}"))?;
        running
            .waiting()
            .await
            .map_err(|e| anyhow::anyhow!("MCP session ended abnormally: {e}"))?;
        Ok(())
    })
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("memtool", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let call = match tools::command_line(&request.name, &arguments) {
            Ok(call) => call,
            Err(message) => return Ok(failure(format!("memtool: {message}")).into()),
        };
        let _turn = self
            .one_at_a_time
            .acquire()
            .await
            .map_err(|_| ErrorData::internal_error("the server is shutting down", None))?;
        let child = tokio::process::Command::new(&self.exe)
            .args(&call.argv)
            .current_dir(&self.root)
            .env(ROOT_VAR, &self.root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(e) => {
                return Ok(
                    failure(format!("memtool: cannot run {}: {e}", self.exe.display())).into(),
                )
            }
        };
        let output = tokio::select! {
            output = child.wait_with_output() => output,
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("cancelled", None));
            }
        };
        let output = match output {
            Ok(output) => output,
            Err(e) => return Ok(failure(format!("memtool: {}: {e}", request.name)).into()),
        };
        Ok(result(&request.name, &call.files, &output).into())
    }
}

/// A call's result from its child's output: exit 0, or 1 (a gate failed,
/// which is an answer), gives the document and the digest; anything else
/// the child's standard error, which ends with the command's one-line error.
fn result(name: &str, files: &[String], output: &std::process::Output) -> CallToolResult {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stderr = stderr.trim_end();
    let code = output.status.code();
    if !matches!(code, Some(0) | Some(1)) {
        let message = if stderr.is_empty() {
            match code {
                Some(code) => format!("memtool {name} exited with {code}"),
                None => format!("memtool {name} was killed ({})", output.status),
            }
        } else {
            stderr.to_string()
        };
        return failure(message);
    }
    let (json, digest) = match output.stdout.iter().position(|&b| b == 0) {
        Some(nul) => (&output.stdout[..nul], &output.stdout[nul + 1..]),
        None => (&output.stdout[..], &[][..]),
    };
    let document: Value = match serde_json::from_slice(json) {
        Ok(document) => document,
        Err(e) => return failure(format!("memtool {name}: its JSON did not parse: {e}")),
    };
    let mut text = format!("memtool {name} {}", files.join(" "));
    if code == Some(1) {
        text.push_str(" — a gate failed (the command line exits 1)");
    }
    text.push('\n');
    if !stderr.is_empty() {
        // Warnings, the run a logdir was read from, a gate's pass/fail line.
        text.push('\n');
        text.push_str(stderr);
        text.push('\n');
    }
    text.push('\n');
    text.push_str(String::from_utf8_lossy(digest).trim_end());
    text.push_str(&format!(
        "\n\n(The whole JSON document, schema memtool/{name}/v1, is this result's structured content.)"
    ));
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(document);
    result
}

/// A tool-level error: the agent sees `message`.
fn failure(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}
