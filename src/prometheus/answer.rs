//! A `query_range` answer read as it streams in: the API envelope (`status`, `errorType`,
//! `error`, `data.resultType`, `data.result`) parsed by serde straight from the response's chunks,
//! keeping the first `max_series` series of `data.result` and only counting the others, so an
//! answer of hundreds of megabytes costs the series kept, not its size. The bytes read are
//! bounded ([`MAX_STREAMED_BYTES`]); the first few kilobytes are kept to quote a body that is
//! not the API's JSON.

use std::fmt;

use bytes::Buf as _;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::RangeSeries;

/// Most bytes of one answer read before giving up (the series kept are bounded by the cap;
/// this bounds the time spent reading the ones left out).
pub const MAX_STREAMED_BYTES: usize = 512 * 1024 * 1024;

/// Bytes of the start of an answer kept to quote when it is not the API's JSON.
const PREFIX_BYTES: usize = 4096;

/// What an answer said, with at most `max_series` series.
#[derive(Debug, Default)]
pub(super) struct Answer {
    /// `success` or `error`.
    pub(super) status: String,
    /// `errorType` of an error answer.
    pub(super) error_type: Option<String>,
    /// `error` of an error answer.
    pub(super) error: Option<String>,
    /// `data.resultType`, when the answer had `data`.
    pub(super) result_type: Option<String>,
    /// The first series of `data.result`.
    pub(super) series: Vec<RangeSeries>,
    /// How many series `data.result` held in all.
    pub(super) total: usize,
}

/// Why an answer could not be read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The connection failed while reading.
    Transport(reqwest::Error),
    /// Over [`MAX_STREAMED_BYTES`].
    TooLarge,
    /// Not the API's JSON: the start of the body.
    NotJson(String),
}

/// A blocking reader over the chunks the async side sends, keeping the first bytes.
struct Chunks {
    rx: tokio::sync::mpsc::Receiver<bytes::Bytes>,
    current: bytes::Bytes,
    prefix: Vec<u8>,
}

impl std::io::Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        if self.prefix.len() < PREFIX_BYTES {
            let room = PREFIX_BYTES - self.prefix.len();
            self.prefix.extend_from_slice(&buf[..n.min(room)]);
        }
        self.current.advance(n);
        Ok(n)
    }
}

/// Reads `res` as it streams in and parses it, keeping at most `max_series` series.
///
/// # Errors
/// [`ReadError`].
pub(super) async fn read(
    mut res: reqwest::Response,
    max_series: usize,
) -> Result<Answer, ReadError> {
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(8);
    let parser = tokio::task::spawn_blocking(move || {
        let mut chunks = Chunks {
            rx,
            current: bytes::Bytes::new(),
            prefix: Vec::new(),
        };
        let parsed = {
            let mut de = serde_json::Deserializer::from_reader(&mut chunks);
            AnswerSeed { max_series }
                .deserialize(&mut de)
                .and_then(|a| de.end().map(|()| a))
        };
        parsed.map_err(|_| String::from_utf8_lossy(&chunks.prefix).into_owned())
    });
    let mut read = 0usize;
    let pumped: Result<(), ReadError> = async {
        while let Some(chunk) = res.chunk().await.map_err(ReadError::Transport)? {
            read += chunk.len();
            if read > MAX_STREAMED_BYTES {
                return Err(ReadError::TooLarge);
            }
            if tx.send(chunk).await.is_err() {
                // The parser is done (or gave up): the rest is not needed.
                break;
            }
        }
        Ok(())
    }
    .await;
    drop(tx);
    let parsed = parser
        .await
        .map_err(|e| ReadError::NotJson(format!("the answer could not be read: {e}")))?;
    pumped?;
    parsed.map_err(ReadError::NotJson)
}

struct AnswerSeed {
    max_series: usize,
}

impl<'de> DeserializeSeed<'de> for AnswerSeed {
    type Value = Answer;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Answer, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AnswerSeed {
    type Value = Answer;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Prometheus API answer")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Answer, A::Error> {
        let mut out = Answer::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "status" => out.status = map.next_value()?,
                "errorType" => out.error_type = map.next_value()?,
                "error" => out.error = map.next_value()?,
                "data" => {
                    let data = map.next_value_seed(DataSeed {
                        max_series: self.max_series,
                    })?;
                    if let Some((result_type, series, total)) = data {
                        out.result_type = Some(result_type);
                        out.series = series;
                        out.total = total;
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// `data`: `(resultType, the first series, how many in all)`; `None` when null.
struct DataSeed {
    max_series: usize,
}

type Data = Option<(String, Vec<RangeSeries>, usize)>;

impl<'de> DeserializeSeed<'de> for DataSeed {
    type Value = Data;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Data, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for DataSeed {
    type Value = Data;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the answer's data")
    }

    fn visit_none<E>(self) -> Result<Data, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Data, E> {
        Ok(None)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Data, D::Error> {
        d.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Data, A::Error> {
        let mut result_type = String::new();
        let mut series = Vec::new();
        let mut total = 0;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "resultType" => result_type = map.next_value()?,
                "result" => {
                    (series, total) = map.next_value_seed(ResultSeed {
                        max_series: self.max_series,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Some((result_type, series, total)))
    }
}

/// `data.result`: the first `max_series` series, and how many there were.
struct ResultSeed {
    max_series: usize,
}

impl<'de> DeserializeSeed<'de> for ResultSeed {
    type Value = (Vec<RangeSeries>, usize);

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ResultSeed {
    type Value = (Vec<RangeSeries>, usize);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of series")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut kept = Vec::new();
        let mut total = 0usize;
        loop {
            let more = if kept.len() < self.max_series {
                match seq.next_element::<RangeSeries>()? {
                    Some(s) => {
                        kept.push(s);
                        true
                    }
                    None => false,
                }
            } else {
                seq.next_element::<IgnoredAny>()?.is_some()
            };
            if !more {
                break;
            }
            total += 1;
        }
        Ok((kept, total))
    }
}
