/** The CRC-32C module of `crc-32` (SheetJS), which ships declarations for its CRC-32 module only; the same API. */
declare module 'crc-32/crc32c' {
  /** CRC-32C of the bytes as a signed 32-bit integer (`>>> 0` for kafkajs's unsigned value). */
  export function buf(data: Uint8Array | number[], seed?: number): number;
}
