#include "CKeepalivedCarry.h"

// A sequence lock each way: the writer makes the count odd, writes, makes it even; a reader
// retries while it is odd or changed under it. Neither side ever waits for the other: a reader
// gives up after a few tries and keeps what it had.
#define TRIES 64

void ckeepalived_carry_init(ckeepalived_carry_shared *shared, uint32_t buffer_frames, uint32_t frame_bytes, uint32_t rate) {
    shared->magic = CKEEPALIVED_CARRY_MAGIC;
    shared->version = CKEEPALIVED_CARRY_VERSION;
    shared->data_offset = CKEEPALIVED_CARRY_DATA_OFFSET;
    shared->buffer_frames = buffer_frames;
    shared->frame_bytes = frame_bytes;
    shared->rate = rate;
}

void ckeepalived_carry_publish(ckeepalived_carry_shared *shared, ckeepalived_carry_position position) {
    uint32_t sequence = __atomic_load_n(&shared->sequence, __ATOMIC_RELAXED);
    __atomic_store_n(&shared->sequence, sequence + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&shared->played_generation, position.generation, __ATOMIC_RELAXED);
    __atomic_store_n(&shared->played, position.played, __ATOMIC_RELAXED);
    __atomic_store_n(&shared->queued, position.queued, __ATOMIC_RELAXED);
    __atomic_store_n(&shared->stamp_ns, position.stamp_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&shared->sequence, sequence + 2, __ATOMIC_RELEASE);
}

int ckeepalived_carry_read(const ckeepalived_carry_shared *shared, ckeepalived_carry_position *position) {
    ckeepalived_carry_shared *s = (ckeepalived_carry_shared *)shared;
    for (int try = 0; try < TRIES; try++) {
        uint32_t before = __atomic_load_n(&s->sequence, __ATOMIC_ACQUIRE);
        if (before & 1) continue;
        ckeepalived_carry_position read = {
            .generation = __atomic_load_n(&s->played_generation, __ATOMIC_RELAXED),
            .played = __atomic_load_n(&s->played, __ATOMIC_RELAXED),
            .queued = __atomic_load_n(&s->queued, __ATOMIC_RELAXED),
            .stamp_ns = __atomic_load_n(&s->stamp_ns, __ATOMIC_RELAXED),
        };
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->sequence, __ATOMIC_RELAXED) != before) continue;
        *position = read;
        return 0;
    }
    return -1;
}

uint64_t ckeepalived_carry_played_at(ckeepalived_carry_position position, uint32_t rate, int64_t now_ns) {
    if (now_ns <= position.stamp_ns || rate == 0) return position.played;
    int64_t elapsed = now_ns - position.stamp_ns;
    // Frames played since the stamp, rounded down; a minute or more plays everything queued.
    uint64_t frames = elapsed >= 60 * (int64_t)1000000000 ? position.queued
                                                         : (uint64_t)((__int128)elapsed * rate / 1000000000);
    return position.played + (frames < position.queued ? frames : position.queued);
}

uint64_t ckeepalived_carry_ahead_at(ckeepalived_carry_position position, uint32_t rate, int64_t now_ns) {
    if (now_ns >= position.stamp_ns || rate == 0) return 0;
    int64_t ahead = position.stamp_ns - now_ns;
    if (ahead > 60 * (int64_t)1000000000) ahead = 60 * (int64_t)1000000000;
    return (uint64_t)((__int128)ahead * rate / 1000000000);
}

int ckeepalived_carry_player_read(const ckeepalived_carry_shared *shared, ckeepalived_carry_player *player) {
    ckeepalived_carry_shared *s = (ckeepalived_carry_shared *)shared;
    for (int try = 0; try < TRIES; try++) {
        uint32_t before = __atomic_load_n(&s->player_sequence, __ATOMIC_ACQUIRE);
        if (before & 1) continue;
        ckeepalived_carry_player read = {
            .written = __atomic_load_n(&s->written, __ATOMIC_RELAXED),
            .state = __atomic_load_n(&s->state, __ATOMIC_RELAXED),
            .generation = __atomic_load_n(&s->generation, __ATOMIC_RELAXED),
        };
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->player_sequence, __ATOMIC_RELAXED) != before) continue;
        *player = read;
        return 0;
    }
    return -1;
}

void ckeepalived_carry_player_write(ckeepalived_carry_shared *shared, ckeepalived_carry_player player) {
    uint32_t sequence = __atomic_load_n(&shared->player_sequence, __ATOMIC_RELAXED);
    __atomic_store_n(&shared->player_sequence, sequence + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&shared->written, player.written, __ATOMIC_RELAXED);
    __atomic_store_n(&shared->state, player.state, __ATOMIC_RELAXED);
    __atomic_store_n(&shared->generation, player.generation, __ATOMIC_RELAXED);
    __atomic_store_n(&shared->player_sequence, sequence + 2, __ATOMIC_RELEASE);
}

void ckeepalived_carry_end(ckeepalived_carry_shared *shared) {
    __atomic_store_n(&shared->ended, 1, __ATOMIC_RELEASE);
}

int ckeepalived_carry_ended(const ckeepalived_carry_shared *shared) {
    return __atomic_load_n(&((ckeepalived_carry_shared *)shared)->ended, __ATOMIC_ACQUIRE) != 0;
}
