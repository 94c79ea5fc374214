// Certificate login (PKI): which user a TLS client certificate names, and why one is refused. The
// chain, its dates and the CRL are checked by the TLS stack during the handshake (infra/tls.ts asks
// for the certificate but lets the handshake finish); what it found arrives here as the socket's
// `authorized` and `authorizationError`, so every refusal is a 401 with the error body the client
// can read, not a handshake failure it cannot.

import { DomainError } from '../../../domain/shared/errors.ts';

/** The certificate fields that may name the user (TLS_CLIENT_USER_FIELD); the value is the user's
 * code. `CN`, `emailAddress` and `UID` are the subject's attributes, `SAN_EMAIL` the e-mail
 * address (rfc822Name) of the subject alternative name. */
export const CertificateUserFields = ['CN', 'emailAddress', 'UID', 'SAN_EMAIL'] as const;
export type CertificateUserField = (typeof CertificateUserFields)[number];

/** What node:tls tells of a peer certificate (getPeerCertificate(): an empty object when there is
 * none, null once the socket is destroyed): an attribute given twice is a list. */
export type PeerCertificate = { subject?: Readonly<Record<string, string | readonly string[] | undefined>>; subjectaltname?: string };

/** What the handshake found, as the TLS socket reports it. */
export type Presented = { certificate: PeerCertificate | null | undefined; authorized: boolean; authorizationError: string | undefined };

export const certificateRejected = (message: string, errors: readonly string[] = []): DomainError =>
  new DomainError('AUTH.CERTIFICATE_REJECTED', message, errors);

/** OpenSSL's verification errors (X509_V_ERR_*, as node names them) in the words of the answer. */
const REASONS: Readonly<Record<string, string>> = {
  CERT_HAS_EXPIRED: 'the certificate has expired',
  CERT_NOT_YET_VALID: 'the certificate is not valid yet',
  CERT_REVOKED: 'the certificate is revoked (it is in the CRL)',
  UNABLE_TO_GET_ISSUER_CERT: 'the certificate is not issued by a trusted CA',
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: 'the certificate is not issued by a trusted CA',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'the certificate is not issued by a trusted CA',
  SELF_SIGNED_CERT_IN_CHAIN: 'the certificate is not issued by a trusted CA',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'the certificate is self-signed',
  CERT_SIGNATURE_FAILURE: "the certificate's signature does not verify",
  // OpenSSL goes on verifying after a first error and reports the last: a certificate from an
  // unknown issuer (a self-signed one) ends here too, for no CRL of that issuer is loaded.
  UNABLE_TO_GET_CRL:
    'the certificate is not issued by a trusted CA, or its issuer has no CRL in TLS_CLIENT_CRL: revocation cannot be checked',
  CRL_HAS_EXPIRED: 'the CRL has expired (its nextUpdate has passed): revocation cannot be checked until TLS_CLIENT_CRL is renewed',
  CRL_NOT_YET_VALID: 'the CRL is not valid yet: revocation cannot be checked',
  INVALID_PURPOSE: 'the certificate is not for client authentication',
};

/** The attribute's one value: an attribute given more than once names no one user. */
const single = (value: string | readonly string[] | undefined): string | undefined =>
  typeof value === 'string' && value !== '' ? value : undefined;

/** The e-mail addresses of a subject alternative name as node writes it (`email:a@b, DNS:c`; a
 * value holding a comma or quote is a JSON string since node 17.3 / 16.13.2 / 14.18.3). */
export function sanEmails(subjectaltname: string | undefined): string[] {
  const found: string[] = [];
  for (const m of (subjectaltname ?? '').matchAll(/(?:^|, )email:("(?:[^"\\]|\\.)*"|[^,]*)/g)) {
    const raw = m[1] ?? '';
    found.push(raw.startsWith('"') ? (JSON.parse(raw) as string) : raw);
  }
  return found;
}

/** The value of the configured field, or why there is none. */
export function certificateUserName(certificate: PeerCertificate, field: CertificateUserField): string | { missing: string } {
  if (field === 'SAN_EMAIL') {
    const emails = sanEmails(certificate.subjectaltname);
    if (emails.length === 1 && emails[0] !== '') return emails[0] as string;
    return {
      missing:
        emails.length === 0
          ? 'the certificate has no e-mail address in its subject alternative name'
          : 'the certificate has more than one e-mail address in its subject alternative name',
    };
  }
  return single(certificate.subject?.[field]) ?? { missing: `the certificate's subject has no single ${field}` };
}

/** The user code a certificate names, after the handshake's verdict: throws the 401 otherwise. */
export function certificateUser(presented: Presented, field: CertificateUserField): string {
  const { certificate, authorized, authorizationError } = presented;
  // An absent certificate is reported as an empty object (and, on a resumed TLS 1.3 session of
  // some node versions, as authorized): no subject, no login.
  if (certificate?.subject === undefined) throw certificateRejected('No client certificate was presented', ['certificate: absent']);
  if (!authorized) {
    const code = authorizationError ?? 'UNKNOWN';
    throw certificateRejected('The client certificate is not accepted', [
      `certificate: ${REASONS[code] ?? 'it does not verify'} (${code})`,
    ]);
  }
  const name = certificateUserName(certificate, field);
  if (typeof name !== 'string')
    throw certificateRejected('The client certificate names no user', [`certificate: ${name.missing} (TLS_CLIENT_USER_FIELD=${field})`]);
  return name;
}
