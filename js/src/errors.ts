/**
 * The one error type the codec throws. `kind` is a stable snake_case name
 * from spec/nwb.md §12 (decoding) or from the event layer (encoding an
 * ill-formed event object), so callers branch on it, never on the message.
 */
export type NwbErrorKind =
  // spec/nwb.md §12
  | 'truncated'
  | 'overlong_varint'
  | 'varint_overflow'
  | 'bad_version'
  | 'invalid_utf8'
  | 'non_canonical_hex'
  | 'non_canonical_name'
  | 'empty_tag'
  | 'tag_block_mismatch'
  | 'trailing_bytes'
  | 'timestamp_out_of_range'
  | 'record_too_large'
  | 'too_many_tags'
  | 'too_many_tag_elements'
  | 'string_too_large'
  | 'unknown_dictionary'
  | 'decompress'
  | 'bad_dictionary_set'
  // spec/transport.md §4
  | 'unknown_message'
  | 'bad_subscription_id'
  | 'non_canonical_flag'
  | 'too_many_records'
  | 'batch_too_large'
  | 'bad_dictionary_hash'
  // encoding an event object (names of the JSON event layer)
  | 'wrong_type'
  | 'missing_field'
  | 'null'
  | 'negative_number'
  | 'non_string_tag_element'
  | 'invalid_hex'
  | 'hex_length'
  | 'kind_out_of_range'
  | 'lone_surrogate';

export class NwbError extends Error {
  readonly kind: NwbErrorKind;

  constructor(kind: NwbErrorKind, detail?: string) {
    super(detail ? `${kind}: ${detail}` : kind);
    this.name = 'NwbError';
    this.kind = kind;
  }
}
