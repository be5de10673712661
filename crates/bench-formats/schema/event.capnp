# Cap'n Proto profile of a NIP-01 event for `nostrwire bench formats`.
# Generated Rust: src/formats/event_capnp.rs (see src/formats/capnp.rs for how to regenerate).
@0xd2b5a4c1e3f70a19;

struct Event {
  id @0 :Data;          # 32 bytes
  pubkey @1 :Data;      # 32 bytes
  createdAt @2 :UInt64;
  kind @3 :UInt16;
  tags @4 :List(List(Value));
  content @5 :Text;
  sig @6 :Data;         # 64 bytes
}

# A tag element: text, or the bytes of a lowercase hex string.
struct Value {
  union {
    text @0 :Text;
    hex @1 :Data;
  }
}

struct Batch {
  events @0 :List(Event);
}
