/** A customer as GraphQL answers it: what the REST rows map and the dashboard shows (no imports: the dashboard bundles this file). */
export interface CustomerData {
  databaseId: number;
  email: string;
  firstName: string | null;
  lastName: string | null;
  phone: string | null;
  createdAt: string;
}
