/* codec.h - gradient compression codecs: parse a spec, encode a float32
 * gradient with error feedback, decode a compressed body.
 *
 * Pure: no sockets, no threads, no state of its own.  The worker keeps the
 * residuals (worker/compress.c) and encodes each key part it pushes; the
 * server decodes each compressed push into a float32 body before summing it
 * (server/decomp.c).  With pull=1 the server also encodes each round's sum
 * (with a residual of its own) once, and its replies carry that body, which
 * the worker decodes (worker/io_reply.c).
 *
 * Bodies on the wire (little-endian), for a part of n float32 elements:
 *   2bit  f32 threshold T, then ceil(n/16) u32 words: element i is in word
 *         i/16, byte (i%16)/4 of it, bits 7-6, 5-4, 3-2, 1-0 for i%4 = 0..3;
 *         11 = +T, 10 = -T, 00 = 0 (MXNet's layout)
 *   1bit  f32 scale s, then ceil(n/32) u32 words: bit i%32 of word i/32 set
 *         = -s, clear = +s
 *   topk  f32 ratio, u32 k, k u32 element indices (strictly increasing),
 *         then k f32 values
 *   fp16  n IEEE binary16 values (round to nearest even)
 *
 * The 2-bit, 1-bit and fp16 loops have AVX2 (+F16C) versions, picked at run
 * time: 2-bit and fp16 give the same bytes and residuals as the portable C
 * loops; 1-bit's scale (a mean) may differ in its last bits (another order
 * of summation).
 *
 * Threads: every function may be called from any thread.
 */
#ifndef KVS_REDUCE_CODEC_H
#define KVS_REDUCE_CODEC_H

#include <stddef.h>
#include <stdint.h>

enum red_codec_id {
    RED_CODEC_NONE = 0,
    RED_CODEC_2BIT = 1,
    RED_CODEC_1BIT = 2,
    RED_CODEC_TOPK = 3,
    RED_CODEC_FP16 = 4,
    RED_CODEC_MAX = 4 /* the highest id */
};

/* A parsed spec. */
typedef struct red_codec {
    int id;        /* enum red_codec_id */
    float param;   /* 2bit: the threshold; topk: the ratio; others 0 */
    int pull;      /* 1: the servers compress the round's sum in their replies too
                    * (server/decomp.h); 0: replies stay float32 */
} red_codec;

/* Parse spec ("none", "2bit threshold=T", "1bit", "topk ratio=R", "fp16";
 * each codec may add "pull=0" or "pull=1" (default 1); words separated by
 * spaces; NULL or "" mean none).  2bit's threshold defaults to 0.5 and must
 * be a finite number > 0; topk's ratio must be in (0, 1].  Returns 0, or
 * KVS_EINVAL with why naming the bad word. */
int red_codec_parse(const char *spec, red_codec *out, char *why, size_t whylen);

/* The canonical spec of c ("2bit threshold=0.5", "1bit pull=0": pull=1,
 * the default, is not written) into buf. */
void red_codec_spec(const red_codec *c, char *buf, size_t len);

/* Does codec c keep a residual (error feedback)?  2bit, 1bit, topk. */
int red_codec_has_residual(const red_codec *c);

/* topk: how many elements a part of n elements sends. */
uint64_t red_codec_topk_k(float ratio, uint64_t n);

/* The bytes of the encoded body of n elements (n <= UINT32_MAX). */
uint64_t red_codec_bytes(const red_codec *c, uint64_t n);

/* Encode the n gradient values grad with error feedback: residual (n
 * values; NULL for fp16) += grad, then the encoded values are subtracted
 * from it.  out has red_codec_bytes(c, n) bytes.  scratch: n floats topk
 * may use (NULL: it allocates; returns -1 when it cannot).  0 or -1. */
int red_codec_encode(const red_codec *c, const float *grad, float *residual, uint64_t n,
                     uint8_t *out, float *scratch);

/* red_codec_encode, and dec (n floats; may be grad itself) gets the body's
 * decoding, the same floats as red_codec_decode writes: 2bit and 1bit in
 * the encoding pass, the others by decoding after.  0 or -1. */
int red_codec_encode_decoded(const red_codec *c, const float *grad, float *residual,
                             uint64_t n, uint8_t *out, float *scratch, float *dec);

/* Check a body of len bytes of codec id for a part of n elements and write
 * its n decoded values into dst.  *param gets the codec's parameter as the
 * body states it (2bit threshold, topk ratio; 0 otherwise).  Returns 0, or
 * KVS_EPROTO with why (wrong size, bad threshold, index out of range). */
int red_codec_decode(int id, const uint8_t *body, uint64_t len, float *dst, uint64_t n,
                     float *param, char *why, size_t whylen);

/* Tests: on = 1 makes every call use the portable C loops instead of the
 * AVX2 ones (a process-wide switch; set it before any codec call).
 * Returns 1 when the portable loops are what runs now. */
int red_codec_portable(int on);

/* The codec's name ("2bit", ...; "?" for an unknown id). */
const char *red_codec_name(int id);

#endif
