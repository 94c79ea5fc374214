// Identity: users, user groups and their region assignments, effective roles (a user's own and
// those its groups carry) and who may change whom, and the login. The catalogues it names (user
// types, user group types, access rules) are registries (modules/registries/). Logins: a password
// (login.ts) and a TLS client certificate (certificateLogin.ts).

import { composeModule } from '../../api/module.ts';
import { certificateLoginModule } from './api/certificateLogin.ts';
import { loginModule } from './api/login.ts';
import { userGroupRegionsModule } from './api/userGroupRegions.ts';
import { userGroupsModule } from './api/userGroups.ts';
import { usersModule } from './api/users.ts';

export const identityModule = composeModule('identity', [userGroupsModule, usersModule, userGroupRegionsModule, loginModule, certificateLoginModule]);
