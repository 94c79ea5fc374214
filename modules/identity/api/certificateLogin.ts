// Certificate login: on the TLS listener (TLS_CLIENT_CA set), a request without a bearer token is
// the PKI user its client certificate names. There is no token to get: every request is judged by
// the certificate of its connection (verified at the handshake against the CA and the CRL) and the
// user as it is now (ENABLE, inside its validity, on PKI), with its effective roles now. So a
// disabled user, a revoked certificate or a lapsed validity takes effect at the next request, the
// private key never leaves the client, and nothing bearer-like exists that could be replayed over
// another channel. A request that carries a bearer token is judged by the token, as anywhere.

import type { FastifyRequest } from 'fastify';
import { TLSSocket } from 'node:tls';
import { certificateRejected, certificateUser, CertificateUserFields, type CertificateUserField } from '../domain/certificate.ts';
import { canLogInWithCertificate, user } from '../domain/user.ts';
import { hasStaleClientCertificate } from '../../../domain/ports.ts';
import type { Caller } from '../../../api/auth.ts';
import type { AppDeps } from '../../../api/module.ts';
import { rolesOf } from './userRoles.ts';

const userField = (deps: AppDeps): CertificateUserField => {
  const field = deps.settings?.identity?.certificateUserField ?? 'CN';
  // The configuration is validated at start; a value from elsewhere is a programming error.
  if (!(CertificateUserFields as readonly string[]).includes(field)) throw new Error(`unknown certificate user field ${field}`);
  return field as CertificateUserField;
};

/** The caller a client certificate names, or undefined off the TLS listener or where it asks for
 * no certificate (then the bearer token decides, as without TLS). */
export async function certificateCaller(request: FastifyRequest, deps: AppDeps): Promise<Caller | undefined> {
  const socket = request.raw.socket;
  if (!(socket instanceof TLSSocket) || deps.settings?.identity?.clientCertificates !== true) return undefined;
  if (hasStaleClientCertificate(socket)) {
    throw certificateRejected('The CRL changed since this connection verified the client certificate: connect again', [
      'certificate: verified against a CRL that has been replaced; a new connection verifies it against the one in force',
    ]);
  }
  const code = certificateUser(
    // node types authorizationError as an Error; it is OpenSSL's code as a string (CERT_HAS_EXPIRED).
    {
      certificate: socket.getPeerCertificate(),
      authorized: socket.authorized,
      authorizationError: socket.authorized ? undefined : String(socket.authorizationError),
    },
    userField(deps),
  );
  const found = await deps.runtime.service(user).live(code, true);
  if (found === undefined || !canLogInWithCertificate(found.fields, deps.clock.now())) {
    // One answer whether the user is unknown, disabled, outside its validity or not on PKI.
    throw certificateRejected('The client certificate names no user that can log in with it', [
      'certificate: its user does not exist, is not ENABLE, is outside its validity, or does not have authentication PKI',
    ]);
  }
  return { sub: String(found.fields.code), roles: await rolesOf(deps, found.fields) };
}
