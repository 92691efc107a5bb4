// liblookupd-phonenumbers.so exports lookupd_pnb_NAME for each lookupd_pn_NAME of
// Sources/CPhoneNumbers/include/CPhoneNumbers.h (same parameters, same meaning). Nothing links
// against it: CPhoneNumbers.c opens it with dlopen and looks the names up with dlsym.
#ifndef LOOKUPD_PHONENUMBERS_BRIDGE_H
#define LOOKUPD_PHONENUMBERS_BRIDGE_H
#endif
