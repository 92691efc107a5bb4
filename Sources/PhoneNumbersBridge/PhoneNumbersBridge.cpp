// The C++ half of Sources/CPhoneNumbers, built as its own shared object
// (liblookupd-phonenumbers.so) so that only a process that needs libphonenumber's data loads
// it, with libphonenumber, libgeocoding, protobuf, ICU and abseil (CPhoneNumbers.c opens it
// with dlopen on first use; docs/NUMBERING.md "Start-up"). Each lookupd_pnb_NAME here is
// lookupd_pn_NAME of CPhoneNumbers.h; the other prefix keeps the executable's wrappers from
// interposing on calls inside this object.
//
// A thin layer: the metadata comes from the bytes libphonenumber compiled in (metadata_get,
// the same bytes PhoneNumberUtil parses), the geocoding tables from libgeocoding's generated
// arrays, region names from ICU as the geocoder itself gets them.
#include "../CPhoneNumbers/include/CPhoneNumbers.h"

#include <dlfcn.h>

#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <unicode/locid.h>
#include <unicode/unistr.h>

#include "phonenumbers/geocoding/phonenumber_offline_geocoder.h"
#include "phonenumbers/phonemetadata.pb.h"
#include "phonenumbers/phonenumber.pb.h"
#include "phonenumbers/phonenumberutil.h"

// Exported by libphonenumber and libgeocoding but declared in headers Debian does not install
// (metadata.h, geocoding_data.h); the declarations follow those generated headers.
namespace i18n {
namespace phonenumbers {
int metadata_size();
const void *metadata_get();

struct PrefixDescriptions {
    const int32_t *prefixes;
    const int prefixes_size;
    const char **descriptions;
    const int32_t *possible_lengths;
    const int possible_lengths_size;
};
const char **get_prefix_language_code_pairs();
int get_prefix_language_code_pairs_size();
const PrefixDescriptions *get_prefix_descriptions(int index);
}  // namespace phonenumbers
}  // namespace i18n

using i18n::phonenumbers::PhoneMetadata;
using i18n::phonenumbers::PhoneMetadataCollection;
using i18n::phonenumbers::PhoneNumber;
using i18n::phonenumbers::PhoneNumberDesc;
using i18n::phonenumbers::PhoneNumberUtil;

namespace {

struct Metadata {
    PhoneMetadataCollection collection;
    bool ok = false;
    std::map<std::string, int> byRegion;  // geographic region id -> territory
    std::map<int, int> nonGeographic;     // calling code -> territory ("001")
    std::string libraryPath;

    Metadata() {
        ok = collection.ParseFromArray(i18n::phonenumbers::metadata_get(), i18n::phonenumbers::metadata_size());
        for (int i = 0; ok && i < collection.metadata_size(); i++) {
            const PhoneMetadata &m = collection.metadata(i);
            if (m.id() == "001") {
                nonGeographic[m.country_code()] = i;
            } else {
                byRegion[m.id()] = i;
            }
        }
        Dl_info info;
        if (dladdr(reinterpret_cast<const void *>(&i18n::phonenumbers::metadata_get), &info) && info.dli_fname) {
            char resolved[4096];
            libraryPath = realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
        }
    }
};

const Metadata &metadata() {
    static const Metadata instance;
    return instance;
}

const PhoneMetadata *territory(int t) {
    const Metadata &m = metadata();
    if (!m.ok || t < 0 || t >= m.collection.metadata_size()) return nullptr;
    return &m.collection.metadata(t);
}

const PhoneNumberDesc *description(int t, int desc) {
    const PhoneMetadata *m = territory(t);
    if (!m) return nullptr;
    switch (desc) {
    case LOOKUPD_PN_GENERAL: return m->has_general_desc() ? &m->general_desc() : nullptr;
    case LOOKUPD_PN_PREMIUM_RATE: return m->has_premium_rate() ? &m->premium_rate() : nullptr;
    case LOOKUPD_PN_TOLL_FREE: return m->has_toll_free() ? &m->toll_free() : nullptr;
    case LOOKUPD_PN_SHARED_COST: return m->has_shared_cost() ? &m->shared_cost() : nullptr;
    case LOOKUPD_PN_VOIP: return m->has_voip() ? &m->voip() : nullptr;
    case LOOKUPD_PN_PERSONAL_NUMBER: return m->has_personal_number() ? &m->personal_number() : nullptr;
    case LOOKUPD_PN_PAGER: return m->has_pager() ? &m->pager() : nullptr;
    case LOOKUPD_PN_UAN: return m->has_uan() ? &m->uan() : nullptr;
    case LOOKUPD_PN_VOICEMAIL: return m->has_voicemail() ? &m->voicemail() : nullptr;
    case LOOKUPD_PN_FIXED_LINE: return m->has_fixed_line() ? &m->fixed_line() : nullptr;
    case LOOKUPD_PN_MOBILE: return m->has_mobile() ? &m->mobile() : nullptr;
    default: return nullptr;
    }
}

int copyOut(const std::string &text, char *out, int capacity) {
    if (capacity <= 0 || text.size() >= static_cast<size_t>(capacity)) return 0;
    memcpy(out, text.data(), text.size());
    out[text.size()] = 0;
    return static_cast<int>(text.size());
}

bool parseE164(const char *e164, PhoneNumber *number) {
    return PhoneNumberUtil::GetInstance()->Parse(e164, "ZZ", number) == PhoneNumberUtil::NO_PARSING_ERROR;
}

}  // namespace

extern "C" {

const uint8_t *lookupd_pnb_metadata_bytes(size_t *size) {
    *size = static_cast<size_t>(i18n::phonenumbers::metadata_size());
    return static_cast<const uint8_t *>(i18n::phonenumbers::metadata_get());
}

int lookupd_pnb_metadata_ok(void) { return metadata().ok ? 1 : 0; }

const char *lookupd_pnb_library_path(void) { return metadata().libraryPath.c_str(); }

int lookupd_pnb_territory_count(void) {
    return metadata().ok ? metadata().collection.metadata_size() : 0;
}

const char *lookupd_pnb_territory_text(int t, int field) {
    const PhoneMetadata *m = territory(t);
    if (!m) return nullptr;
    switch (field) {
    case LOOKUPD_PN_ID: return m->id().c_str();
    case LOOKUPD_PN_INTERNATIONAL_PREFIX: return m->has_international_prefix() ? m->international_prefix().c_str() : nullptr;
    case LOOKUPD_PN_PREFERRED_INTERNATIONAL_PREFIX:
        return m->has_preferred_international_prefix() ? m->preferred_international_prefix().c_str() : nullptr;
    case LOOKUPD_PN_NATIONAL_PREFIX: return m->has_national_prefix() ? m->national_prefix().c_str() : nullptr;
    case LOOKUPD_PN_NATIONAL_PREFIX_FOR_PARSING:
        return m->has_national_prefix_for_parsing() ? m->national_prefix_for_parsing().c_str() : nullptr;
    case LOOKUPD_PN_NATIONAL_PREFIX_TRANSFORM_RULE:
        return m->has_national_prefix_transform_rule() ? m->national_prefix_transform_rule().c_str() : nullptr;
    case LOOKUPD_PN_LEADING_DIGITS: return m->has_leading_digits() ? m->leading_digits().c_str() : nullptr;
    default: return nullptr;
    }
}

int lookupd_pnb_territory_country_code(int t) {
    const PhoneMetadata *m = territory(t);
    return m ? m->country_code() : 0;
}

int lookupd_pnb_territory_flags(int t) {
    const PhoneMetadata *m = territory(t);
    if (!m) return 0;
    return (m->main_country_for_code() ? 1 : 0) | (m->same_mobile_and_fixed_line_pattern() ? 2 : 0);
}

const char *lookupd_pnb_desc_pattern(int t, int desc) {
    const PhoneNumberDesc *d = description(t, desc);
    return d && d->has_national_number_pattern() ? d->national_number_pattern().c_str() : nullptr;
}

const char *lookupd_pnb_desc_example(int t, int desc) {
    const PhoneNumberDesc *d = description(t, desc);
    return d && d->has_example_number() ? d->example_number().c_str() : nullptr;
}

int lookupd_pnb_desc_lengths(int t, int desc, int local_only, int32_t *out, int capacity) {
    const PhoneNumberDesc *d = description(t, desc);
    if (!d) return 0;
    const auto &lengths = local_only ? d->possible_length_local_only() : d->possible_length();
    for (int i = 0; i < lengths.size() && i < capacity; i++) out[i] = lengths.Get(i);
    return lengths.size();
}

int lookupd_pnb_mobile_is_geographical(int cc) {
    return PhoneNumberUtil::GetInstance()->IsNumberGeographical(PhoneNumberUtil::MOBILE, cc) ? 1 : 0;
}

int lookupd_pnb_geo_file_count(void) { return i18n::phonenumbers::get_prefix_language_code_pairs_size(); }

const char *lookupd_pnb_geo_file_name(int f) {
    if (f < 0 || f >= lookupd_pnb_geo_file_count()) return nullptr;
    return i18n::phonenumbers::get_prefix_language_code_pairs()[f];
}

int lookupd_pnb_geo_entry_count(int f) {
    if (f < 0 || f >= lookupd_pnb_geo_file_count()) return 0;
    return i18n::phonenumbers::get_prefix_descriptions(f)->prefixes_size;
}

const int32_t *lookupd_pnb_geo_prefixes(int f) {
    if (f < 0 || f >= lookupd_pnb_geo_file_count()) return nullptr;
    return i18n::phonenumbers::get_prefix_descriptions(f)->prefixes;
}

const char *const *lookupd_pnb_geo_descriptions(int f) {
    if (f < 0 || f >= lookupd_pnb_geo_file_count()) return nullptr;
    return i18n::phonenumbers::get_prefix_descriptions(f)->descriptions;
}

int lookupd_pnb_geo_lengths(int f, int32_t *out, int capacity) {
    if (f < 0 || f >= lookupd_pnb_geo_file_count()) return 0;
    const i18n::phonenumbers::PrefixDescriptions *d = i18n::phonenumbers::get_prefix_descriptions(f);
    for (int i = 0; i < d->possible_lengths_size && i < capacity; i++) out[i] = d->possible_lengths[i];
    return d->possible_lengths_size;
}

int lookupd_pnb_region_name(const char *region, const char *language, char *out, int capacity) {
    icu::UnicodeString name;
    icu::Locale("", region).getDisplayCountry(icu::Locale(language), name);
    std::string utf8;
    name.toUTF8String(utf8);
    // ICU answers an unknown region with its code: not a name.
    if (utf8 == region) return 0;
    return copyOut(utf8, out, capacity);
}

int lookupd_pnb_reference_parse(const char *text, const char *region, char *e164, int capacity,
                               int *valid, int *possible) {
    PhoneNumberUtil *util = PhoneNumberUtil::GetInstance();
    PhoneNumber number;
    PhoneNumberUtil::ErrorType error = util->Parse(text, region, &number);
    *valid = 0;
    *possible = -1;
    if (capacity > 0) e164[0] = 0;
    if (error != PhoneNumberUtil::NO_PARSING_ERROR) return static_cast<int>(error);
    std::string formatted;
    util->Format(number, PhoneNumberUtil::E164, &formatted);
    copyOut(formatted, e164, capacity);
    *valid = util->IsValidNumber(number) ? 1 : 0;
    *possible = static_cast<int>(util->IsPossibleNumberWithReason(number));
    return 0;
}

int lookupd_pnb_reference_format(const char *e164, int format, const char *region, char *out, int capacity) {
    PhoneNumberUtil *util = PhoneNumberUtil::GetInstance();
    PhoneNumber number;
    if (!parseE164(e164, &number)) return 0;
    std::string formatted;
    switch (format) {
    case LOOKUPD_PN_FORMAT_E164: util->Format(number, PhoneNumberUtil::E164, &formatted); break;
    case LOOKUPD_PN_FORMAT_INTERNATIONAL: util->Format(number, PhoneNumberUtil::INTERNATIONAL, &formatted); break;
    case LOOKUPD_PN_FORMAT_NATIONAL: util->Format(number, PhoneNumberUtil::NATIONAL, &formatted); break;
    case LOOKUPD_PN_FORMAT_OUT_OF_COUNTRY: util->FormatOutOfCountryCallingNumber(number, region, &formatted); break;
    default: return 0;
    }
    return copyOut(formatted, out, capacity);
}

int lookupd_pnb_reference_description(const char *e164, const char *language, char *out, int capacity) {
    static const i18n::phonenumbers::PhoneNumberOfflineGeocoder geocoder;
    PhoneNumber number;
    if (!parseE164(e164, &number)) return 0;
    return copyOut(geocoder.GetDescriptionForNumber(number, icu::Locale(language)), out, capacity);
}

int lookupd_pnb_reference_region(const char *e164, char *out, int capacity) {
    PhoneNumber number;
    if (!parseE164(e164, &number)) return copyOut("ZZ", out, capacity);
    std::string region;
    PhoneNumberUtil::GetInstance()->GetRegionCodeForNumber(number, &region);
    return copyOut(region, out, capacity);
}

int lookupd_pnb_reference_type(const char *e164) {
    PhoneNumber number;
    if (!parseE164(e164, &number)) return static_cast<int>(PhoneNumberUtil::UNKNOWN);
    return static_cast<int>(PhoneNumberUtil::GetInstance()->GetNumberType(number));
}

int lookupd_pnb_reference_regions_for_code(int cc, int *territories, int capacity) {
    const Metadata &m = metadata();
    std::list<std::string> regions;
    PhoneNumberUtil::GetInstance()->GetRegionCodesForCountryCallingCode(cc, &regions);
    int n = 0;
    for (const std::string &region : regions) {
        int index = -1;
        if (region == "001") {
            auto it = m.nonGeographic.find(cc);
            if (it != m.nonGeographic.end()) index = it->second;
        } else {
            auto it = m.byRegion.find(region);
            if (it != m.byRegion.end()) index = it->second;
        }
        if (index < 0) continue;
        if (n < capacity) territories[n] = index;
        n++;
    }
    return n;
}

}  // extern "C"
