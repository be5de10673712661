/** Policy limits applied while decoding (spec/nwb.md §9). */
export interface Limits {
  /** A record, a frame or a decompressed record. */
  maxRecordBytes: number;
  /** Tags of one event. */
  maxTags: number;
  /** Elements of one tag, the name included. */
  maxTagElements: number;
  /** A text element, a hex element's text length, the content. */
  maxStringBytes: number;
}

export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxRecordBytes: 1 << 20,
  maxTags: 20_000,
  maxTagElements: 1_000,
  maxStringBytes: 1 << 20,
});
