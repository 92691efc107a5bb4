// The C face of the installed libphonenumber (Debian libphonenumber-dev): its numbering-plan
// metadata and geocoding tables, read once, so lookupd derives its own tables from them at
// start-up (Sources/Directory/NumberingData.swift). The library lives behind
// liblookupd-phonenumbers.so (Sources/PhoneNumbersBridge), opened on the first call of any
// lookupd_pn_ function below but the four loader ones: a process that finds the metadata in
// its cache (NumberingCache.swift) or needs no numbering never loads libphonenumber. When the
// bridge cannot be loaded, the first such call prints why and exits with status 1. Nothing here runs per request: the
// "reference" calls at the end cost tens of microseconds each and serve tests and checks only.
// Only they and lookupd_pn_mobile_is_geographical build libphonenumber's PhoneNumberUtil.
//
// Every string returned is owned by the library's data or this layer and lives as long as
// the process. Thread-safe: the data is loaded once, under C++'s static-initialisation lock.
#ifndef LOOKUPD_CPHONENUMBERS_H
#define LOOKUPD_CPHONENUMBERS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Where liblookupd-phonenumbers.so is (beside the executable, or ../lib/lookupd/ from it),
/// resolved; NULL when it is in neither place. Does not load it.
const char *lookupd_pn_bridge_path(void);
/// Loads the bridge (once); 1 when it is loaded.
int lookupd_pn_load(void);
/// Why the bridge could not be loaded ("" when it is loaded). Loads it first.
const char *lookupd_pn_load_error(void);
/// 1 when this process has loaded the bridge (it never unloads it). Does not load it.
int lookupd_pn_is_loaded(void);

/// The serialized metadata compiled into libphonenumber (what PhoneNumberUtil loads).
const uint8_t *lookupd_pn_metadata_bytes(size_t *size);
/// 1 when the bytes parsed as libphonenumber's metadata collection.
int lookupd_pn_metadata_ok(void);
/// The file the library was loaded from (e.g. /usr/lib/x86_64-linux-gnu/libphonenumber.so.8.12), or "".
const char *lookupd_pn_library_path(void);

/// Territories in the metadata, geographic regions and the non-geographic "001" entities.
int lookupd_pn_territory_count(void);

enum {
    LOOKUPD_PN_ID = 0,
    LOOKUPD_PN_INTERNATIONAL_PREFIX,
    LOOKUPD_PN_PREFERRED_INTERNATIONAL_PREFIX,
    LOOKUPD_PN_NATIONAL_PREFIX,
    LOOKUPD_PN_NATIONAL_PREFIX_FOR_PARSING,
    LOOKUPD_PN_NATIONAL_PREFIX_TRANSFORM_RULE,
    LOOKUPD_PN_LEADING_DIGITS,
};
/// A text field of territory `t`; NULL when the field is absent.
const char *lookupd_pn_territory_text(int t, int field);
int lookupd_pn_territory_country_code(int t);
/// Bit 0: main_country_for_code; bit 1: same_mobile_and_fixed_line_pattern.
int lookupd_pn_territory_flags(int t);

/// Number descriptions, in the order libphonenumber's GetNumberType tries them after
/// the general one.
enum {
    LOOKUPD_PN_GENERAL = 0,
    LOOKUPD_PN_PREMIUM_RATE,
    LOOKUPD_PN_TOLL_FREE,
    LOOKUPD_PN_SHARED_COST,
    LOOKUPD_PN_VOIP,
    LOOKUPD_PN_PERSONAL_NUMBER,
    LOOKUPD_PN_PAGER,
    LOOKUPD_PN_UAN,
    LOOKUPD_PN_VOICEMAIL,
    LOOKUPD_PN_FIXED_LINE,
    LOOKUPD_PN_MOBILE,
    LOOKUPD_PN_DESC_COUNT,
};
/// The national number pattern of a description; NULL when it has none.
const char *lookupd_pn_desc_pattern(int t, int desc);
/// Its example number (national significant number); NULL when none.
const char *lookupd_pn_desc_example(int t, int desc);
/// Its possible lengths (or, with `local_only`, the local-only ones) into `out`; returns how
/// many there are (possibly more than `capacity`).
int lookupd_pn_desc_lengths(int t, int desc, int local_only, int32_t *out, int capacity);

/// libphonenumber's IsNumberGeographical for a mobile number of calling code `cc`. The
/// library keeps that list in code, not in its metadata, so this builds PhoneNumberUtil
/// (some 10 ms of CPU, once per process): call it only where it is needed.
int lookupd_pn_mobile_is_geographical(int cc);

/// The offline geocoder's tables (libgeocoding): one file per "CC_LANG" pair (`86_zh`).
int lookupd_pn_geo_file_count(void);
const char *lookupd_pn_geo_file_name(int f);
int lookupd_pn_geo_entry_count(int f);
/// E.164 prefixes (country code first), ascending; descriptions one to one, UTF-8.
const int32_t *lookupd_pn_geo_prefixes(int f);
const char *const *lookupd_pn_geo_descriptions(int f);
/// The prefix lengths (digits, country code included) file `f` holds, ascending; returns
/// how many there are.
int lookupd_pn_geo_lengths(int f, int32_t *out, int capacity);

/// The name of a region in a language (`US`, `zh` -> 美国), as the geocoder shows countries
/// (ICU's display names). Writes UTF-8 and returns its length, 0 when unknown.
int lookupd_pn_region_name(const char *region, const char *language, char *out, int capacity);

// ---- Reference calls: the library itself, ~30 µs each. Tests and checks only. ----

/// Parses `text` as a number dialled in `region` (libphonenumber's Parse). Returns the
/// library's error type (0: parsed), writes the E.164 form and sets `valid` (IsValidNumber)
/// and `possible` (IsPossibleNumberWithReason's result).
int lookupd_pn_reference_parse(const char *text, const char *region, char *e164, int capacity,
                               int *valid, int *possible);
enum {
    LOOKUPD_PN_FORMAT_E164 = 0,
    LOOKUPD_PN_FORMAT_INTERNATIONAL = 1,
    LOOKUPD_PN_FORMAT_NATIONAL = 2,
    /// FormatOutOfCountryCallingNumber from `region`.
    LOOKUPD_PN_FORMAT_OUT_OF_COUNTRY = 4,
};
/// Formats an E.164 number (`+861062345678`); returns the length written, 0 on failure.
int lookupd_pn_reference_format(const char *e164, int format, const char *region, char *out, int capacity);
/// The offline geocoder's description of an E.164 number in `language`.
int lookupd_pn_reference_description(const char *e164, const char *language, char *out, int capacity);
/// The region libphonenumber assigns an E.164 number (GetRegionCodeForNumber), "ZZ" if none.
int lookupd_pn_reference_region(const char *e164, char *out, int capacity);
/// GetNumberType of an E.164 number, as libphonenumber's PhoneNumberType value.
int lookupd_pn_reference_type(const char *e164);
/// Territory indexes of the regions sharing calling code `cc`, in the order
/// GetRegionCodesForCountryCallingCode gives them; returns how many there are.
int lookupd_pn_reference_regions_for_code(int cc, int *territories, int capacity);

#ifdef __cplusplus
}
#endif

#endif
