// Identity: users, user groups and their region assignments, effective roles (a user's own and
// those its groups carry), the catalogue of roles that can be granted, who may change whom, and
// the login. The catalogues it names (user types, user group types, access rules) are registries
// (modules/registries/). Logins: a password (login.ts) and a TLS client certificate
// (certificateLogin.ts); the logout and the failed-login lockout (credentials.ts).

import type { Module } from '../../api/module.ts';
import { certificateCaller } from './api/certificateLogin.ts';
import { credentialRoutes } from './api/credentials.ts';
import { loginRoute, sessionCaller } from './api/login.ts';
import { membershipRoutes } from './api/membershipRoutes.ts';
import { rolesCatalogueRoute } from './api/rolesCatalogue.ts';
import { userGroupRegionOperations, userGroupRegionsRoutes } from './api/userGroupRegions.ts';
import { userGroupsRoutes } from './api/userGroups.ts';
import { userStanding } from './api/userRoles.ts';
import { userOperations, usersRoutes } from './api/users.ts';
import { credentialStreams } from './domain/credentials.ts';
import { user } from './domain/user.ts';
import { userGroup } from './domain/userGroup.ts';
import { userGroupRegion } from './domain/userGroupRegion.ts';

export const identityModule: Module = {
  name: 'identity',
  resources: [
    { definition: userGroup },
    { definition: user, routes: userOperations, guard: userStanding },
    { definition: userGroupRegion, routes: userGroupRegionOperations },
  ],
  routes(app, deps) {
    userGroupsRoutes(app, deps);
    usersRoutes(app, deps);
    membershipRoutes(app, deps);
    userGroupRegionsRoutes(app, deps);
    loginRoute(app, deps);
    rolesCatalogueRoute(app, deps);
    credentialRoutes(app, deps);
  },
  // Failed logins and ended sessions: streams of their own, beside the users' (domain/credentials.ts).
  streams: credentialStreams,
  // A login session's token works while its user does, with the user's roles as they are now.
  authenticated: sessionCaller,
  // On the TLS listener, a request without a token is the PKI user its client certificate names.
  presented: certificateCaller,
};
