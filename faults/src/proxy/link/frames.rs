//! Where a link's stream divides into Kafka frames, kept from the
//! connection's first byte so a request-level toxic added at any moment acts
//! on whole requests.
//!
//! Kafka's protocol frames every request and response the same way: a 4-byte
//! big-endian size, then that many bytes, whose first are the header — for a
//! request `api_key` (i16), `api_version` (i16), `correlation_id` (i32); for
//! a response `correlation_id` (i32) (the protocol guide, "Requests and
//! Responses"; headers v1/v2 only add fields after these). A [`Frames`] reads
//! the sizes as bytes pass and nothing else, so the direct copy pays a few
//! comparisons per write for it ([`Frames::pass`]), not a copy or a wake-up.
//! The toxic path cuts its chunks at frame starts ([`Frames::cut`]) so a
//! request toxic decides each frame before its first byte leaves.
//!
//! Nothing tells the proxy which links carry Kafka (the harness puts request
//! toxics only on client and broker links, never on etcd's). A size no Kafka
//! frame can have — negative, shorter than a header, above
//! [`FRAME_BYTES_MAX`] — marks the stream *lost*: no frame is seen on it
//! again and request toxics leave it alone. An HTTP/2 stream such as etcd's
//! gRPC goes lost on its first bytes (the preface `PRI * HTTP/2.0` reads as a
//! size of 1.3 GB).

use bytes::{Bytes, BytesMut};

/// The bytes a frame's start must hold before it can be judged: the size,
/// then a request's `api_key` and `api_version`, or a response's
/// `correlation_id`.
pub(crate) const HEAD_BYTES: usize = 8;

/// The largest frame taken for Kafka's: the broker's default
/// `socket.request.max.bytes` (100 MiB) for requests; responses (a Fetch is
/// bounded by `fetch.max.bytes`, 50 MiB by default) fit under it too.
pub(crate) const FRAME_BYTES_MAX: u32 = 100 * 1024 * 1024;

/// The first [`HEAD_BYTES`] of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head([u8; HEAD_BYTES]);

impl Head {
    /// The bytes after the size prefix.
    pub fn size(&self) -> u32 {
        u32::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3]])
    }

    /// A request's API key.
    pub fn api_key(&self) -> i16 {
        i16::from_be_bytes([self.0[4], self.0[5]])
    }

    /// A response's correlation id.
    pub fn response_correlation_id(&self) -> i32 {
        i32::from_be_bytes([self.0[4], self.0[5], self.0[6], self.0[7]])
    }
}

/// A run of a stream's bytes inside one frame; `head` is set when it begins
/// with the frame's first byte, `last` when it ends with the frame's last.
/// On a lost stream a segment is whatever came, with neither.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub bytes: Bytes,
    pub head: Option<Head>,
    pub last: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// At a frame's start: `have` of its first bytes seen. `passed` once
    /// some of them went out unjudged (the direct copy's), so the frame is
    /// under way and is not judged when its head completes.
    Head {
        buffer: [u8; HEAD_BYTES],
        have: usize,
        passed: bool,
    },
    /// Inside a frame whose head is complete: `left` bytes to its end.
    Body { left: u64 },
    /// Not Kafka's framing.
    Lost,
}

/// The frame boundaries of one direction of one connection.
#[derive(Clone, Debug)]
pub(crate) struct Frames {
    state: State,
}

impl Default for Frames {
    fn default() -> Self {
        Frames {
            state: State::Head {
                buffer: [0; HEAD_BYTES],
                have: 0,
                passed: false,
            },
        }
    }
}

impl Frames {
    /// Whether the stream stopped looking like Kafka's.
    pub fn is_lost(&self) -> bool {
        self.state == State::Lost
    }

    /// Whether the stream is between frames, with no byte of the next seen.
    #[cfg(test)]
    pub fn at_boundary(&self) -> bool {
        matches!(self.state, State::Head { have: 0, .. })
    }

    /// Follows `bytes` as they go out unjudged (the direct copy).
    pub fn pass(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match &mut self.state {
                State::Lost => return,
                State::Body { left } => {
                    let n = (*left).min(bytes.len() as u64);
                    *left -= n;
                    bytes = &bytes[n as usize..];
                    if *left == 0 {
                        self.state = Frames::default().state;
                    }
                }
                State::Head {
                    buffer,
                    have,
                    passed,
                } => {
                    let n = (HEAD_BYTES - *have).min(bytes.len());
                    buffer[*have..*have + n].copy_from_slice(&bytes[..n]);
                    *have += n;
                    *passed = true;
                    bytes = &bytes[n..];
                    if *have == HEAD_BYTES {
                        let head = Head(*buffer);
                        self.state = body_of(head);
                    }
                }
            }
        }
    }

    /// Cuts `carry` (the start of a frame whose head was incomplete, held
    /// back from the last cut) followed by `chunk` into segments, each
    /// inside one frame, those that start a frame carrying its head. The
    /// bytes of a head still incomplete at the end are left in `carry`, not
    /// in a segment: a frame is judged before its first byte goes out. Once
    /// the stream is lost the rest is one segment with no head.
    pub fn cut(&mut self, carry: &mut BytesMut, chunk: Bytes) -> Vec<Segment> {
        let mut data = if carry.is_empty() {
            chunk
        } else {
            carry.extend_from_slice(&chunk);
            carry.split().freeze()
        };
        let mut segments = Vec::new();
        while !data.is_empty() {
            match &mut self.state {
                State::Lost => {
                    segments.push(Segment {
                        bytes: std::mem::take(&mut data),
                        head: None,
                        last: false,
                    });
                }
                State::Body { left } => {
                    let n = (*left).min(data.len() as u64);
                    *left -= n;
                    let last = *left == 0;
                    segments.push(Segment {
                        bytes: data.split_to(n as usize),
                        head: None,
                        last,
                    });
                    if last {
                        self.state = Frames::default().state;
                    }
                }
                State::Head {
                    buffer,
                    have,
                    passed,
                } => {
                    let passed = *passed;
                    // Bytes of this head already cut (and so already in
                    // `data` at its front, via `carry`) or passed.
                    let start = *have;
                    let n = (HEAD_BYTES - start).min(data.len());
                    buffer[start..start + n].copy_from_slice(&data[..n]);
                    *have += n;
                    if *have < HEAD_BYTES {
                        if passed {
                            // Under way already: nothing to judge, out it goes.
                            segments.push(Segment {
                                bytes: std::mem::take(&mut data),
                                head: None,
                                last: false,
                            });
                        } else {
                            // Keep the partial head back, and remember none of
                            // it is counted yet.
                            *have = 0;
                            carry.extend_from_slice(&data);
                            data.clear();
                        }
                        continue;
                    }
                    let head = Head(*buffer);
                    self.state = body_of(head);
                    // The segment runs from this head's first byte in `data`.
                    let taken = if passed { n } else { HEAD_BYTES };
                    let head = (!passed).then_some(head);
                    let in_frame = match self.state {
                        State::Body { left } => left,
                        _ => 0,
                    };
                    if self.state == State::Lost {
                        // The head itself showed this is no Kafka stream.
                        segments.push(Segment {
                            bytes: std::mem::take(&mut data),
                            head: None,
                            last: false,
                        });
                        continue;
                    }
                    let end = (taken as u64 + in_frame).min(data.len() as u64) as usize;
                    let mut last = true;
                    if let State::Body { left } = &mut self.state {
                        *left -= (end - taken) as u64;
                        last = *left == 0;
                        if last {
                            self.state = Frames::default().state;
                        }
                    }
                    segments.push(Segment {
                        bytes: data.split_to(end),
                        head,
                        last,
                    });
                }
            }
        }
        segments
    }

    /// Gives up on the framing: a head held back in a carry went out
    /// unjudged (the stream ended inside it).
    pub fn lose(&mut self) {
        self.state = State::Lost;
    }
}

/// The state after a complete head: inside its frame, at the next frame when
/// the frame is the head alone, or lost when no Kafka frame has its size.
fn body_of(head: Head) -> State {
    let size = head.size();
    if size < (HEAD_BYTES - 4) as u32 || size > FRAME_BYTES_MAX {
        return State::Lost;
    }
    let left = u64::from(size) - (HEAD_BYTES - 4) as u64;
    if left == 0 {
        Frames::default().state
    } else {
        State::Body { left }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(api_key: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let size = (8 + body.len()) as u32;
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&api_key.to_be_bytes());
        out.extend_from_slice(&3i16.to_be_bytes());
        out.extend_from_slice(&correlation_id.to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    /// Cuts `stream` fed in pieces of `piece` bytes; returns each frame's
    /// bytes as the segments put them together, with its head's api key,
    /// checking that exactly each frame's final segment is marked last.
    fn cut_in_pieces(stream: &[u8], piece: usize) -> Vec<(Option<i16>, Vec<u8>)> {
        let mut frames = Frames::default();
        let mut carry = BytesMut::new();
        let mut out: Vec<(Option<i16>, Vec<u8>)> = Vec::new();
        let mut ended = true;
        for chunk in stream.chunks(piece) {
            for segment in frames.cut(&mut carry, Bytes::copy_from_slice(chunk)) {
                match segment.head {
                    Some(head) => {
                        assert!(ended, "a frame started before the last ended");
                        out.push((Some(head.api_key()), segment.bytes.to_vec()));
                    }
                    None => {
                        assert!(!ended, "a segment with no head continues a frame");
                        out.last_mut().unwrap().1.extend_from_slice(&segment.bytes);
                    }
                }
                ended = segment.last;
            }
        }
        assert!(
            ended && carry.is_empty(),
            "the stream ended on a whole frame"
        );
        out
    }

    #[test]
    fn frames_are_found_however_the_stream_is_chunked() {
        let a = frame(0, 1, &[7; 100]);
        let b = frame(26, 2, &[]);
        let c = frame(1, 3, &[9; 3]);
        let stream = [a.clone(), b.clone(), c.clone()].concat();
        for piece in 1..=stream.len() {
            assert_eq!(
                cut_in_pieces(&stream, piece),
                vec![
                    (Some(0), a.clone()),
                    (Some(26), b.clone()),
                    (Some(1), c.clone())
                ],
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn a_passed_prefix_leaves_the_frame_under_way_and_the_next_judged() {
        let a = frame(0, 1, &[7; 10]);
        let b = frame(26, 2, &[1, 2]);
        for split in 0..a.len() {
            let mut frames = Frames::default();
            frames.pass(&a[..split]);
            let mut carry = BytesMut::new();
            let rest = [&a[split..], &b[..]].concat();
            let segments = frames.cut(&mut carry, Bytes::from(rest));
            let heads: Vec<Option<i16>> = segments
                .iter()
                .map(|s| s.head.map(|h| h.api_key()))
                .collect();
            let expected = if split == 0 {
                vec![Some(0), Some(26)]
            } else {
                vec![None, Some(26)]
            };
            assert_eq!(heads, expected, "split at {split}");
            assert!(frames.at_boundary());
        }
    }

    #[test]
    fn an_impossible_size_loses_the_stream_and_passes_everything() {
        let mut frames = Frames::default();
        let mut carry = BytesMut::new();
        let preface = Bytes::from_static(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        let segments = frames.cut(&mut carry, preface.clone());
        assert!(frames.is_lost());
        assert_eq!(
            segments,
            vec![Segment {
                bytes: preface,
                head: None,
                last: false,
            }]
        );
        let mut passed = Frames::default();
        passed.pass(&(-1i32).to_be_bytes());
        passed.pass(&[0; 4]);
        assert!(passed.is_lost());
    }

    #[test]
    fn a_response_head_gives_its_correlation_id() {
        let mut frames = Frames::default();
        let mut carry = BytesMut::new();
        let mut response = 6u32.to_be_bytes().to_vec();
        response.extend_from_slice(&(-7i32).to_be_bytes());
        response.extend_from_slice(&[0, 0]);
        let segments = frames.cut(&mut carry, Bytes::from(response));
        assert_eq!(segments.len(), 1);
        assert!(segments[0].last);
        assert_eq!(segments[0].head.unwrap().response_correlation_id(), -7);
    }
}
