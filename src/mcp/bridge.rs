//! `incidentmind mcp --url URL --token TOKEN`: the stdio bridge for MCP clients that only start
//! local processes (Claude Desktop, some HolmesGPT set-ups). It reads JSON-RPC messages from
//! stdin, one a line, and relays them to the server's `/mcp` over Streamable HTTP with the API
//! token, and relays every message the server sends back to stdout. Both ends are the SDK's
//! transports (`rmcp`'s stdio framing and its Streamable HTTP client, which keeps the session id
//! and the negotiated protocol version); this file only joins them. It starts no process and
//! holds no state of its own: the answers are the server's, word for word.

use rmcp::model::{ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, RoleServer};

/// Messages waiting to be sent upstream, in order.
const QUEUE: usize = 64;

/// Relays stdin ↔ `url` until stdin closes or the server ends the session.
///
/// # Errors
/// When the server cannot be reached at all or ends the session with an error (each request
/// that failed was answered on stdout with a JSON-RPC error first).
pub async fn run(url: &str, token: &str) -> anyhow::Result<()> {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let mut upstream: StreamableHttpClientTransport<reqwest::Client> =
        StreamableHttpClientTransport::from_config(config);
    let (stdin, stdout) = rmcp::transport::stdio();
    let mut local: AsyncRwTransport<RoleServer, _, _> = AsyncRwTransport::new_server(stdin, stdout);

    // Sends are awaited one after the other (the server sees the client's order) in their own
    // task, so the relay keeps reading what the server sends meanwhile.
    type Send = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<(), String>> + std::marker::Send>,
    >;
    let (queue, mut pending) = tokio::sync::mpsc::channel::<(Option<RequestId>, Send)>(QUEUE);
    let (failed_tx, mut failed) = tokio::sync::mpsc::channel::<ServerJsonRpcMessage>(QUEUE);
    let sender = tokio::spawn(async move {
        while let Some((id, send)) = pending.recv().await {
            if let Err(e) = send.await {
                eprintln!("incidentmind mcp: {e}");
                if let Some(id) = id {
                    let error = ErrorData::new(
                        ErrorCode::INTERNAL_ERROR,
                        format!("the IncidentMind server did not take this request: {e}"),
                        None,
                    );
                    let _ = failed_tx
                        .send(ServerJsonRpcMessage::error(error, Some(id)))
                        .await;
                }
            }
        }
    });
    let outcome = loop {
        tokio::select! {
            from_client = Transport::<RoleServer>::receive(&mut local) => {
                let Some(message) = from_client else { break Ok(()) };
                let id = match &message {
                    rmcp::model::JsonRpcMessage::Request(r) => Some(r.id.clone()),
                    _ => None,
                };
                let send = Transport::<RoleClient>::send(&mut upstream, message);
                let send: Send = Box::pin(async move { send.await.map_err(|e| e.to_string()) });
                if queue.send((id, send)).await.is_err() {
                    break Err(anyhow::anyhow!("the relay stopped"));
                }
            }
            from_server = Transport::<RoleClient>::receive(&mut upstream) => {
                let Some(message) = from_server else {
                    break Err(anyhow::anyhow!("the server at {url} ended the session"));
                };
                Transport::<RoleServer>::send(&mut local, message).await?;
            }
            Some(error) = failed.recv() => {
                Transport::<RoleServer>::send(&mut local, error).await?;
            }
        }
    };
    drop(queue);
    let _ = sender.await;
    // Drain the errors of the last requests so the client hears why they failed.
    while let Ok(error) = failed.try_recv() {
        Transport::<RoleServer>::send(&mut local, error).await?;
    }
    let _ = Transport::<RoleClient>::close(&mut upstream).await;
    outcome
}
