// The page shape of paged search (SPEC.md, "Shared search and export structures").

export type SortInfo = { sorted: boolean; unsorted: boolean; empty: boolean };

export type PageOf<T> = {
  content: T[];
  totalElements: number;
  totalPages: number;
  size: number;
  number: number;
  numberOfElements: number;
  first: boolean;
  last: boolean;
  empty: boolean;
  sort: SortInfo;
  pageable: { sort: SortInfo; offset: number; pageNumber: number; pageSize: number; paged: boolean; unpaged: boolean };
};

export function pageOf<T>(content: T[], total: number, page: number, size: number, explicitSort: boolean): PageOf<T> {
  const totalPages = Math.ceil(total / size);
  const sort = { sorted: explicitSort, unsorted: !explicitSort, empty: !explicitSort };
  return {
    content,
    totalElements: total,
    totalPages,
    size,
    number: page,
    numberOfElements: content.length,
    first: page === 0,
    last: page >= totalPages - 1,
    empty: content.length === 0,
    sort,
    pageable: { sort, offset: page * size, pageNumber: page, pageSize: size, paged: true, unpaged: false },
  };
}
