// What the arm64 binary needs from glibc 2.38 and Debian 12's glibc 2.36 lacks, linked into
// that binary only (scripts/package --arch arm64).
//
// The static Swift runtime comes from Debian sid's swiftlang, compiled against sid's glibc
// headers: with _GNU_SOURCE those redirect strtol, strtoll and sscanf to their C23 entry points
// (__isoc23_*, which also read binary numbers: "0b101") and declare strlcpy, all new in 2.38.
// The binary is linked against Debian 12's libc (fmod and fmodf then bind to versions 12 has),
// and these definitions satisfy the rest at link time, so nothing asks the dynamic loader for a
// GLIBC_2.38 symbol. On a newer glibc the binary still uses its own copies: same behaviour.
//
// No _GNU_SOURCE here: 2.36's headers then declare what 2.36 exports.

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// The C23 rule both take from glibc 2.38: with base 0 or 2, a "0b" or "0B" prefix followed by a
// binary digit introduces a binary number. When it applies, the digits are read here with
// strto[u]ll's overflow rules; any other input goes to the old function, which reads it the same
// way 2.38 does (a "0b" without a binary digit after it is the number 0, ending at the 'b').
static int binary_prefix(const char *s, int base, const char **digits, int *negative) {
    if (base != 0 && base != 2) return 0;
    while (isspace((unsigned char)*s)) s++;
    *negative = 0;
    if (*s == '+' || *s == '-') *negative = *s++ == '-';
    if (s[0] == '0' && (s[1] == 'b' || s[1] == 'B') && (s[2] == '0' || s[2] == '1')) {
        *digits = s + 2;
        return 1;
    }
    return 0;
}

// The value of the binary digits at s, saturated at limit (ERANGE), and where they end.
static unsigned long long read_binary(const char *s, unsigned long long limit, const char **end) {
    unsigned long long value = 0;
    int overflow = 0;
    for (; *s == '0' || *s == '1'; s++) {
        if (value > (limit - (unsigned long long)(*s - '0')) / 2) overflow = 1;
        else value = value * 2 + (unsigned long long)(*s - '0');
    }
    *end = s;
    if (overflow) {
        errno = ERANGE;
        return limit;
    }
    return value;
}

// A binary number's digits (after its prefix) as strtoll would return a number in [min, max].
static long long binary_value(const char *digits, int negative, char **endptr, long long min, long long max) {
    const char *end;
    // The magnitude of min is max + 1: the most a negative number may reach.
    unsigned long long limit = negative ? (unsigned long long)max + 1 : (unsigned long long)max;
    unsigned long long magnitude = read_binary(digits, limit, &end);
    if (endptr) *endptr = (char *)end;
    if (!negative) return (long long)magnitude;
    return magnitude == (unsigned long long)max + 1 ? min : -(long long)magnitude;
}

long __isoc23_strtol(const char *nptr, char **endptr, int base) {
    const char *digits;
    int negative;
    if (!binary_prefix(nptr, base, &digits, &negative)) return strtol(nptr, endptr, base);
    return (long)binary_value(digits, negative, endptr, LONG_MIN, LONG_MAX);
}

long long __isoc23_strtoll(const char *nptr, char **endptr, int base) {
    const char *digits;
    int negative;
    if (!binary_prefix(nptr, base, &digits, &negative)) return strtoll(nptr, endptr, base);
    return binary_value(digits, negative, endptr, LLONG_MIN, LLONG_MAX);
}

// glibc's ISO C sscanf (what sscanf is without _GNU_SOURCE since glibc 2.7: "%a" is a float, not
// the GNU allocation flag). It differs from __isoc23_sscanf only in binary numbers: "%i" does not
// take a "0b" prefix and there is no "%b" conversion. The Swift runtime's formats (reading
// /proc/self/maps and the like) use neither.
int __isoc99_vsscanf(const char *s, const char *format, va_list ap);

int __isoc23_sscanf(const char *s, const char *format, ...) {
    va_list ap;
    va_start(ap, format);
    int n = __isoc99_vsscanf(s, format, ap);
    va_end(ap);
    return n;
}

// BSD's (and glibc 2.38's): copies at most size - 1 bytes, terminates the copy when size > 0,
// returns strlen(src) so the caller can tell it was cut.
size_t strlcpy(char *dst, const char *src, size_t size) {
    size_t length = strlen(src);
    if (size > 0) {
        size_t n = length < size - 1 ? length : size - 1;
        memcpy(dst, src, n);
        dst[n] = '\0';
    }
    return length;
}
