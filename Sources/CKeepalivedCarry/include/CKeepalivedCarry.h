// CKeepalivedCarry: the memory a player's `keepalived:` PCM and keepalived share while keepalived
// carries the player's audio on its own running stream (docs/players.md, "Carried"). Both sides
// compile this header and its one .c: the ALSA plug-in (scripts/build-alsa-plugin) and the
// library's carrying playback (Sources/KeepAlive/Playback/Carry).
//
// keepalived makes the memory (a memfd, sealed so that it can neither shrink nor grow) at each
// hw_params the player's PCM sends, and passes it with an eventfd over the control socket. The
// player writes its frames into the data area and its own counters; keepalived copies the frames
// into the card's buffer as they come and publishes how far the card has played them. Nothing a
// player writes here is trusted: keepalived reads each counter once per look, checks it against
// its own copy of the sizes, and ends the stream of a player whose counters cannot be.
//
// The counters are plain integers read and written only through the functions below (the
// compiler's __atomic built-ins): Swift imports no _Atomic member.
#ifndef CKEEPALIVED_CARRY_H
#define CKEEPALIVED_CARRY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// "kacarry1", the first eight bytes of the memory.
#define CKEEPALIVED_CARRY_MAGIC 0x317972726163616bULL
#define CKEEPALIVED_CARRY_VERSION 1
/// Where the frames start: the header has a page of its own.
#define CKEEPALIVED_CARRY_DATA_OFFSET 4096u

/// The player's stream, as its PCM's state says (the player's counters' `state`).
enum ckeepalived_carry_player_state {
    /// Set up or prepared, not started: nothing is played.
    CKEEPALIVED_CARRY_IDLE = 0,
    CKEEPALIVED_CARRY_RUNNING = 1,
    CKEEPALIVED_CARRY_PAUSED = 2,
    /// Running, and no more frames come: played to the last one, then idle.
    CKEEPALIVED_CARRY_DRAINING = 3,
};

typedef struct ckeepalived_carry_shared {
    // Written by keepalived before the memory is handed over; keepalived never reads them back.
    uint64_t magic;
    uint32_t version;
    uint32_t data_offset;
    /// The player's buffer: frame N of the stream is at data_offset + (N % buffer_frames) * frame_bytes.
    uint32_t buffer_frames;
    uint32_t frame_bytes;
    uint32_t rate;
    uint32_t reserved[9];

    // The player's (at byte 64, a cache line of their own), consistent under `player_sequence`. keepalived
    // trusts none of them.
    uint32_t player_sequence;
    uint32_t reserved_player;
    uint64_t written;
    uint32_t state;
    /// Bumped at each prepare and drop; `written` starts again at 0 with it.
    uint32_t generation;
    uint32_t padding_player[10];

    // keepalived's (at byte 128), consistent under `sequence` (odd while they change).
    uint32_t sequence;
    /// The generation `played` and `queued` count in.
    uint32_t played_generation;
    /// Frames of the stream the card had played at `stamp_ns`.
    uint64_t played;
    /// Frames after those, in the card's buffer at `stamp_ns`, that it plays from then on.
    uint64_t queued;
    /// CLOCK_MONOTONIC, in nanoseconds.
    int64_t stamp_ns;
    /// Non-zero once keepalived carries the stream no more (why is on the control socket).
    uint32_t ended;
} ckeepalived_carry_shared;

/// What keepalived publishes, read in one piece.
typedef struct ckeepalived_carry_position {
    uint32_t generation;
    uint64_t played;
    uint64_t queued;
    int64_t stamp_ns;
} ckeepalived_carry_position;

/// keepalived: writes the fixed fields of fresh (zeroed) memory, before it is handed over.
void ckeepalived_carry_init(ckeepalived_carry_shared *shared, uint32_t buffer_frames, uint32_t frame_bytes, uint32_t rate);

/// keepalived: publishes a position (the player's PCM reads it at any moment).
void ckeepalived_carry_publish(ckeepalived_carry_shared *shared, ckeepalived_carry_position position);

/// The player: reads the last position published; 0 when read whole, -1 when keepalived was
/// writing it through every try (the caller keeps its previous one).
int ckeepalived_carry_read(const ckeepalived_carry_shared *shared, ckeepalived_carry_position *position);

/// Frames of the stream played at `now_ns`, from `position` and the rate: the card plays what was
/// queued at its rate from the stamp on, and never more than that.
uint64_t ckeepalived_carry_played_at(ckeepalived_carry_position position, uint32_t rate, int64_t now_ns);

/// Frames the card plays before the frame `position.played` at `now_ns`: keepalived's signal
/// ahead of it (a lead-in, the lead left in the card) until the stamp, 0 from then on; at most a
/// minute's.
uint64_t ckeepalived_carry_ahead_at(ckeepalived_carry_position position, uint32_t rate, int64_t now_ns);

/// The player's counters, read by keepalived once per look.
typedef struct ckeepalived_carry_player {
    uint64_t written;
    uint32_t state;
    uint32_t generation;
} ckeepalived_carry_player;

/// keepalived: 0 when read whole, -1 when the player was writing them through every try (a
/// player that never finishes counts as one that wrote nothing new).
int ckeepalived_carry_player_read(const ckeepalived_carry_shared *shared, ckeepalived_carry_player *player);

/// The player's PCM: its counters.
void ckeepalived_carry_player_write(ckeepalived_carry_shared *shared, ckeepalived_carry_player player);

/// keepalived: says the stream is carried no more.
void ckeepalived_carry_end(ckeepalived_carry_shared *shared);
int ckeepalived_carry_ended(const ckeepalived_carry_shared *shared);

#ifdef __cplusplus
}
#endif

#endif
