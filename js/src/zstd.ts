// The zstd decoder for compressed records (spec/nwb.md §11), kept out of
// the core: `useZstd(zstdDecoder)` turns them on.
import { Decompress } from 'fzstd';
import type { ZstdDecoder } from './record.js';

/** fzstd, streamed: output arrives block by block. */
export const zstdDecoder: ZstdDecoder = (frame, onChunk) => {
  new Decompress((chunk) => onChunk(chunk)).push(frame, true);
};
